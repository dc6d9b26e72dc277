"""Dead outbox rows back to the queue one at a time (``ops outbox requeue``, the console's requeue
button through ``POST /v1/ops/outbox/{event_id}/requeue``); by filter, ``service.db.recovery``.

A requeued row is as it was first written — same event_id (the Agent's dedup key), attempts 0, due
now, no lease. The relays are woken after the commit, never by a NOTIFY inside the transaction.
"""

from __future__ import annotations

from uuid import UUID

from psycopg import AsyncConnection
from psycopg.rows import DictRow

from service.db.ops_queries import OUTBOX_COLUMNS
from service.db.recovery import REQUEUED

REQUEUE_DEAD_EVENT = f"""
UPDATE outbox b
SET {REQUEUED}
WHERE b.event_id = %(event_id)s AND b.status = 'dead'
RETURNING {OUTBOX_COLUMNS}
"""

OUTBOX_STATUS = "SELECT status FROM outbox WHERE event_id = %(event_id)s"


class NotRequeueableError(Exception):
    """The event is unknown (``status`` None) or not dead."""

    def __init__(self, event_id: UUID, status: str | None) -> None:
        self.event_id = event_id
        self.status = status
        if status is None:
            message = f"no outbox row with event_id {event_id}"
        else:
            message = f"outbox row {event_id} is {status}, not dead: only dead rows can be requeued"
        super().__init__(message)


async def requeue_dead(conn: AsyncConnection[DictRow], event_id: UUID) -> DictRow:
    """Put one dead row back in the queue; ``NotRequeueableError`` for any other row. Its caller
    wakes the relays once this has committed."""
    async with conn.transaction():
        row = await (await conn.execute(REQUEUE_DEAD_EVENT, {"event_id": event_id})).fetchone()
        if row is None:
            found = await (await conn.execute(OUTBOX_STATUS, {"event_id": event_id})).fetchone()
            raise NotRequeueableError(event_id, None if found is None else found["status"])
    return row

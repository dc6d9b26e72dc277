"""Dead outbox rows back to the queue one at a time (``ops outbox requeue``, the console's requeue
button through ``POST /v1/ops/outbox/{event_id}/requeue``); by filter, ``service.db.recovery``.

A requeued row is as it was first written — same event_id (the Agent's dedup key), attempts 0, due
now, no lease. The relays are woken after the commit, never by a NOTIFY inside the transaction.
"""

from __future__ import annotations

from uuid import UUID

from psycopg import AsyncConnection, Connection
from psycopg.rows import DictRow

from service.db import recovery
from service.db.ops_queries import OUTBOX_COLUMNS

# last_error is kept: it says why the row died until the next attempt replaces it; every earlier
# attempt stays in outbox_attempts.
REQUEUE_DEAD_EVENT = f"""
UPDATE outbox b
SET status = 'pending', attempts = 0, next_attempt_at = now(), lease_owner = NULL, lease_expires_at = NULL
WHERE b.event_id = %(event_id)s AND b.status = 'dead'
RETURNING {OUTBOX_COLUMNS}
"""

OUTBOX_STATUS = "SELECT status FROM outbox WHERE event_id = %(event_id)s"

# A requeue wakes the relays itself, after its commit and outside its transaction (a NOTIFY inside
# one would take the cluster-wide NOTIFY lock at commit), rather than leave the rows to their poll.
WAKE_RELAYS = "SELECT pg_notify('lineup_outbox', '')"


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


def requeue_dead(conn: Connection[DictRow], event_id: UUID) -> DictRow:
    """Put one dead row back in the queue; ``NotRequeueableError`` for any other row."""
    with conn.transaction():
        row = conn.execute(REQUEUE_DEAD_EVENT, {"event_id": event_id}).fetchone()
        if row is None:
            found = conn.execute(OUTBOX_STATUS, {"event_id": event_id}).fetchone()
            raise NotRequeueableError(event_id, None if found is None else found["status"])
    conn.execute(WAKE_RELAYS)
    return row


async def requeue_dead_async(conn: AsyncConnection[DictRow], event_id: UUID) -> DictRow:
    """``requeue_dead`` for the ops API; its caller wakes the relays once this has committed."""
    async with conn.transaction():
        row = await (await conn.execute(REQUEUE_DEAD_EVENT, {"event_id": event_id})).fetchone()
        if row is None:
            found = await (await conn.execute(OUTBOX_STATUS, {"event_id": event_id})).fetchone()
            raise NotRequeueableError(event_id, None if found is None else found["status"])
    return row


def requeue_all_dead(conn: Connection[DictRow]) -> list[DictRow]:
    """Put every dead row back in the queue, in bounded batches (``service.db.recovery``); the rows
    requeued, oldest first."""
    rows = recovery.recover(conn, recovery.DeadFilter(), keep_rows=True).rows
    rows.sort(key=lambda row: (row["created_at"], row["conversation_id"], row["sequence"]))
    return rows

"""Requeue one dead outbox row for the ops API, then wake the relays (after the commit)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import structlog

from service.db import requeue as requeue_db
from service.domain.errors import NotDead, NotFound
from service.use_cases.runtime import Runtime

log = structlog.get_logger("service.ops")


async def requeue_dead(rt: Runtime, event_id: UUID) -> dict[str, Any]:
    """The CLI's rule: dead rows only, the same event_id, attempts back to 0, due now.

    Unknown → ``unknown_event``; a row in any other status → ``not_dead``, and nothing changes.
    """
    try:
        async with rt.pool.connection() as conn:
            row = await requeue_db.requeue_dead_async(conn, event_id)
    except requeue_db.NotRequeueableError as exc:
        if exc.status is None:
            raise NotFound.of("event") from None
        raise NotDead(str(exc)) from None
    rt.wakeups.committed(outbox=True)
    log.info(
        "outbox_requeued",
        event_id=row["event_id"],
        tool_call_id=row["tool_call_id"],
        conversation_id=row["conversation_id"],
    )
    return row

"""Dead outbox rows back to the queue — one, every one, or by filter — then the relays woken
(after each commit). The ops API and ``python -m service ops`` both run these."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import structlog

from service.db import recovery as recovery_db
from service.db import requeue as requeue_db
from service.domain.errors import NotDead, NotFound
from service.use_cases.ops_views import outbox_row
from service.use_cases.unit_of_work import Works

log = structlog.get_logger("service.ops")


async def requeue_dead(rt: Works, event_id: UUID) -> dict[str, Any]:
    """Dead rows only: the same event_id, attempts back to 0, due now.

    Unknown → ``unknown_event``; a row in any other status → ``not_dead``, and nothing changes.
    """
    try:
        async with rt.unit_of_work(transaction=False) as work:
            row = outbox_row(await requeue_db.requeue_dead(work.conn, event_id))
            work.made_due()
            work.then(
                lambda: log.info(
                    "outbox_requeued",
                    event_id=row["event_id"],
                    tool_call_id=row["tool_call_id"],
                    conversation_id=row["conversation_id"],
                )
            )
    except requeue_db.NotRequeueableError as exc:
        if exc.status is None:
            raise NotFound.of("event") from None
        raise NotDead(str(exc)) from None
    return row


async def recover_dead(rt: Works, which: recovery_db.DeadFilter, *, dry_run: bool) -> dict[str, int]:
    """Requeue the dead rows ``which`` names, each by the single requeue's rule, in bounded
    batches; the relays are woken after each batch. A dry run only counts them."""
    done = await _recover(rt, which, dry_run=dry_run)
    return done.answer()


async def requeue_all_dead(rt: Works) -> list[dict[str, Any]]:
    """Every dead row back in the queue, in bounded batches; the rows requeued, oldest first."""
    done = await _recover(rt, recovery_db.DeadFilter(), dry_run=False, keep_rows=True)
    rows = sorted(done.rows, key=lambda row: (row["created_at"], row["conversation_id"], row["sequence"]))
    return [outbox_row(row) for row in rows]


async def _recover(
    rt: Works, which: recovery_db.DeadFilter, *, dry_run: bool, keep_rows: bool = False
) -> recovery_db.Recovery:
    async with rt.unit_of_work(transaction=False) as work:
        done = await recovery_db.recover(
            work.conn,
            which,
            dry_run=dry_run,
            keep_rows=keep_rows,
            committed=lambda: rt.wakeups.committed(outbox=True),
        )
    log.info("outbox_recovered", dry_run=dry_run, **done.answer(), **_described(which))
    return done


def _described(which: recovery_db.DeadFilter) -> dict[str, str]:
    return {name: str(value) for name, value in which.params().items() if value is not None}

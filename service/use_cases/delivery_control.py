"""An operator's pause and resume of delivery (the ops API, ``python -m service ops``); the relays
obey within a second.

A pause needs nothing more: every relay's next claim reads it. A resume wakes the relays after its
commit (``service.wakeups``), so the rows held by the pause go at once, not at the next poll.
"""

from __future__ import annotations

from typing import Any

import structlog

from service.db import delivery as delivery_db
from service.use_cases import ops_reads
from service.use_cases.ops_views import delivery_view
from service.use_cases.unit_of_work import Works

log = structlog.get_logger("service.ops")


async def delivery_state(rt: Works) -> dict[str, Any]:
    return await ops_reads.read(rt, ops_reads.delivery_state())


async def pause(rt: Works, *, by: str, reason: str | None) -> dict[str, Any]:
    async with rt.unit_of_work(transaction=False) as work:
        state = delivery_view(await delivery_db.pause(work.conn, by, reason))
    log.warning("delivery_paused", endpoint=state["endpoint"], paused_by=state["paused_by"], reason=reason)
    return state


async def resume(rt: Works, *, by: str) -> dict[str, Any]:
    async with rt.unit_of_work(transaction=False) as work:
        state = delivery_view(await delivery_db.resume(work.conn))
        work.made_due()
    log.warning("delivery_resumed", endpoint=state["endpoint"], resumed_by=by)
    return state

"""Retention: delivered rows (their attempts go with them) are pruned after a while; dead rows never are.

Pruning runs in small batches so that no statement holds many row locks or writes a large WAL burst
at once; SKIP LOCKED keeps several relays pruning at the same time out of each other's way.
"""

from __future__ import annotations

import asyncio
import random

import psycopg
import structlog

from relay.claims import Conn
from relay.database import RelayPool
from relay.metrics import RelayMetrics

log = structlog.get_logger("relay.retention")
PRUNE_BATCH = 500
PRUNE_EVERY = 300.0

# created_at <= delivered_at, so the (status, created_at) index narrows the scan and the
# delivered_at test decides.
PRUNE_DELIVERED = """
DELETE FROM outbox
WHERE event_id IN (
    SELECT event_id
    FROM outbox
    WHERE status = 'delivered'
      AND created_at < now() - make_interval(days => %(days)s)
      AND delivered_at < now() - make_interval(days => %(days)s)
    ORDER BY created_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED)
"""


async def prune_delivered(
    conn: Conn, retention_days: int, *, batch: int = PRUNE_BATCH, pause: float = 0.05
) -> int:
    """Delete delivered rows older than ``retention_days`` until none are left; returns how many."""
    total = 0
    while True:
        cursor = await conn.execute(PRUNE_DELIVERED, {"days": retention_days, "limit": batch})
        total += cursor.rowcount
        if cursor.rowcount < batch:
            return total
        await asyncio.sleep(pause)


async def keep_pruning(pool: RelayPool, retention_days: int, metrics: RelayMetrics) -> None:
    """Prune now and then, forever; several relays doing it at once stay out of each other's way."""
    await asyncio.sleep(random.uniform(1.0, 10.0))
    while True:
        try:
            async with pool.connection() as conn:
                pruned = await prune_delivered(conn, retention_days)
            if pruned:
                metrics.pruned.inc(pruned)
                log.info("relay_pruned", rows=pruned, retention_days=retention_days)
        except psycopg.Error as exc:
            log.warning("relay_prune_failed", error=str(exc).strip())
        await asyncio.sleep(PRUNE_EVERY * random.uniform(0.8, 1.2))

"""Retention: delivered rows are pruned after ``RELAY_RETENTION_DAYS``, dead ones after
``RELAY_DEAD_RETENTION_DAYS`` (longer by default; 0 keeps them); their attempts go with them.
Pending rows never are.

Pruning runs in small batches so that no statement holds many row locks or writes a large WAL burst
at once; SKIP LOCKED keeps several relays pruning at the same time out of each other's way. After
each round the relay reports its settings and what it pruned in ``outbox_retention``, which the
operator console shows.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass

import psycopg
import structlog

from relay.claims import Conn
from relay.database import RelayPool
from relay.metrics import RelayMetrics
from service.background import Periodic

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

# A dead row's age is its created_at: the retry schedule ends within days of it.
PRUNE_DEAD = """
DELETE FROM outbox
WHERE event_id IN (
    SELECT event_id
    FROM outbox
    WHERE status = 'dead'
      AND created_at < now() - make_interval(days => %(days)s)
    ORDER BY created_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED)
"""

REPORT = """
INSERT INTO outbox_retention AS r (id, delivered_days, dead_days, reported_by, reported_at,
                                   last_pruned_at, last_pruned_rows)
VALUES (true, %(delivered_days)s, %(dead_days)s, %(relay_id)s, now(), now(), %(pruned)s)
ON CONFLICT (id) DO UPDATE
SET delivered_days = excluded.delivered_days, dead_days = excluded.dead_days,
    reported_by = excluded.reported_by, reported_at = excluded.reported_at,
    last_pruned_at = excluded.last_pruned_at, last_pruned_rows = excluded.last_pruned_rows
"""


@dataclass(frozen=True, slots=True)
class Retention:
    delivered_days: int
    #: 0: dead rows are kept.
    dead_days: int
    relay_id: str


async def _prune(conn: Conn, statement: str, days: int, batch: int, pause: float) -> int:
    total = 0
    while True:
        cursor = await conn.execute(statement, {"days": days, "limit": batch})
        total += cursor.rowcount
        if cursor.rowcount < batch:
            return total
        await asyncio.sleep(pause)


async def prune_delivered(
    conn: Conn, retention_days: int, *, batch: int = PRUNE_BATCH, pause: float = 0.05
) -> int:
    """Delete delivered rows older than ``retention_days`` until none are left; returns how many."""
    return await _prune(conn, PRUNE_DELIVERED, retention_days, batch, pause)


async def prune_dead(
    conn: Conn, retention_days: int, *, batch: int = PRUNE_BATCH, pause: float = 0.05
) -> int:
    """Delete dead rows created more than ``retention_days`` ago; returns how many."""
    return await _prune(conn, PRUNE_DEAD, retention_days, batch, pause)


# On Citus (a relay connected to a worker): both prunes on each shard of outbox the worker holds
# (service/db/sql/80_relay_nodes.sql), FOR UPDATE ... SKIP LOCKED staying within one shard.
PRUNE_ON_NODE = "SELECT delivered, dead FROM relay_prune_local(%(delivered_days)s, %(dead_days)s, %(limit)s)"


async def prune_on_node(
    conn: Conn, retention: Retention, *, batch: int = PRUNE_BATCH, pause: float = 0.05
) -> dict[str, int]:
    """The node's shards pruned, a batch per shard and status at a time, until nothing is left."""
    pruned = {"delivered": 0, "dead": 0}
    params = {"delivered_days": retention.delivered_days, "dead_days": retention.dead_days, "limit": batch}
    while True:
        cursor = await conn.execute(PRUNE_ON_NODE, params)
        row = await cursor.fetchone()
        delivered, dead = (int(row[0]), int(row[1])) if row else (0, 0)
        pruned["delivered"] += delivered
        pruned["dead"] += dead
        if delivered == 0 and dead == 0:
            return pruned if retention.dead_days else {"delivered": pruned["delivered"]}
        await asyncio.sleep(pause)


async def prune_and_report(conn: Conn, retention: Retention, *, on_node: bool = False) -> dict[str, int]:
    """One round: both statuses pruned, then the settings and the total reported. ``on_node``: on
    Citus, the shards of the connection's node."""
    if on_node:
        pruned = await prune_on_node(conn, retention)
    else:
        pruned = {"delivered": await prune_delivered(conn, retention.delivered_days)}
        if retention.dead_days:
            pruned["dead"] = await prune_dead(conn, retention.dead_days)
    await conn.execute(
        REPORT,
        {
            "delivered_days": retention.delivered_days,
            "dead_days": retention.dead_days,
            "relay_id": retention.relay_id,
            "pruned": sum(pruned.values()),
        },
    )
    return pruned


class Pruning(Periodic):
    """The relay's retention as a background loop (``service.background``): a round prunes both
    statuses and reports; the first comes 1-10 s after the start, the next every ``PRUNE_EVERY``
    seconds give or take a fifth, so several relays pruning at once stay out of each other's way."""

    name = "relay-retention"

    def __init__(
        self, pool: RelayPool, retention: Retention, metrics: RelayMetrics, *, on_node: bool = False
    ) -> None:
        super().__init__(PRUNE_EVERY, jitter=0.2, first_delay=random.uniform(1.0, 10.0))
        self._on_node = on_node
        self._pool = pool
        self._retention = retention
        self._metrics = metrics

    async def run_once(self) -> None:
        retention = self._retention
        async with self._pool.connection() as conn:
            pruned = await prune_and_report(conn, retention, on_node=self._on_node)
        for status, rows in pruned.items():
            self._metrics.pruned.labels(status).inc(rows)
        if any(pruned.values()):
            log.info(
                "relay_pruned",
                rows=pruned,
                retention_days=retention.delivered_days,
                dead_retention_days=retention.dead_days,
            )

    def failed(self, error: Exception) -> None:
        """A database error is logged and the next round comes; anything else is a bug that ends
        the loop (and so the relay)."""
        if not isinstance(error, psycopg.Error):
            raise error
        log.warning("relay_prune_failed", error=str(error).strip())

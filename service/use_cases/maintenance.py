"""Housekeeping inside ``serve``: sample the outbox gauges, prune old projection events."""

from __future__ import annotations

import asyncio
import time

import psycopg

from service.background import Periodic
from service.clock import CLOCK
from service.db import capabilities as cap_db
from service.db import console_sessions as console_db
from service.db import gauges
from service.db import host_sessions as host_sessions_db
from service.db import limits as limits_db
from service.db import projections as proj_db
from service.db.pool import Pool
from service.metrics import DATABASE_REACHABLE, FOCUSING_OPERATIONS, OUTBOX
from service.outbox_history import OutboxHistory

PROJECTION_RETENTION_SECONDS = 24 * 3600
CLOSED_CAPABILITY_RETENTION_SECONDS = 24 * 3600
ENDED_SESSION_RETENTION_SECONDS = 24 * 3600
PRUNE_INTERVAL_SECONDS = 300.0
SAMPLE_INTERVAL_SECONDS = 15.0
#: The longest WRITE_LIMIT_WINDOW_SECONDS allows: a write allowance older than this has ended.
LONGEST_WRITE_WINDOW_SECONDS = 86400


async def prune_projections(
    pool: Pool, write_window: int = LONGEST_WRITE_WINDOW_SECONDS, *, distributed: bool = False
) -> int:
    """Delete old projection events, the capabilities of long-closed instances, sessions a day
    after they ended (a person's takes the capabilities minted under it along) and write allowances
    whose ``write_window``-second window has ended, in small batches; returns how many rows went.
    On Citus (``distributed``) the batch's deletes run shard after shard: a transaction that
    deleted from shards over several connections at once could not then delete from a reference
    table (``host_sessions``) that those shards reference."""
    total = 0
    while True:
        async with pool.connection() as conn, conn.transaction():
            if distributed:
                await conn.execute("SET LOCAL citus.multi_shard_modify_mode TO 'sequential'")
            deleted = await proj_db.prune(conn, PROJECTION_RETENTION_SECONDS)
            deleted += await cap_db.prune_closed(conn, CLOSED_CAPABILITY_RETENTION_SECONDS)
            deleted += await host_sessions_db.prune(conn, ENDED_SESSION_RETENTION_SECONDS)
            deleted += await console_db.prune(conn, ENDED_SESSION_RETENTION_SECONDS)
            deleted += await limits_db.prune_ended(conn, write_window)
        total += deleted
        if deleted == 0:
            return total


async def sample_gauges(pool: Pool, history: OutboxHistory | None = None) -> None:
    """Refresh the sampled gauges of /metrics from the database (and keep the outbox's depth in
    ``history``, for the operator console)."""
    async with pool.connection() as conn:
        backlog = await OUTBOX.sample(conn)
        sent = time.time()
        focusing = await (await conn.execute(gauges.FOCUSING_OPERATIONS)).fetchone()
        received = time.time()
    DATABASE_REACHABLE.set(1)
    if history is not None:
        history.add(backlog.pending, backlog.dead, backlog.oldest_pending_age_seconds)
    if focusing is not None:
        FOCUSING_OPERATIONS.set(focusing["focusing"])
        CLOCK.observe(focusing["database_now"], sent, received)


class Maintenance(Periodic):
    """Samples the gauges every ``SAMPLE_INTERVAL_SECONDS``, prunes every ``PRUNE_INTERVAL_SECONDS``."""

    name = "maintenance"

    def __init__(
        self,
        pool: Pool,
        history: OutboxHistory | None = None,
        *,
        write_window: int = LONGEST_WRITE_WINDOW_SECONDS,
        distributed: bool = False,
    ) -> None:
        super().__init__(SAMPLE_INTERVAL_SECONDS)
        self._pool = pool
        self._history = history
        self._write_window = write_window
        self._distributed = distributed
        self._last_prune = float("-inf")

    async def run_once(self) -> None:
        loop = asyncio.get_running_loop()
        await sample_gauges(self._pool, self._history)
        if loop.time() - self._last_prune >= PRUNE_INTERVAL_SECONDS:
            await prune_projections(self._pool, self._write_window, distributed=self._distributed)
            self._last_prune = loop.time()

    def failed(self, error: Exception) -> None:
        if isinstance(error, psycopg.Error | OSError):
            DATABASE_REACHABLE.set(0)
        super().failed(error)

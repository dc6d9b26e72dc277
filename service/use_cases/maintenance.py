"""Housekeeping inside ``serve``: prune projection events nobody will replay any more."""

from __future__ import annotations

import asyncio
import contextlib

import structlog

from service.db import projections as proj_db
from service.db.pool import Pool

log = structlog.get_logger("service.maintenance")

PROJECTION_RETENTION_SECONDS = 24 * 3600
INTERVAL_SECONDS = 300.0


async def prune_projections(pool: Pool) -> int:
    """Delete old projection events in small batches; returns how many went."""
    total = 0
    while True:
        async with pool.connection() as conn, conn.transaction():
            deleted = await proj_db.prune(conn, PROJECTION_RETENTION_SECONDS)
        total += deleted
        if deleted == 0:
            return total


async def run_maintenance(pool: Pool, stop: asyncio.Event) -> None:
    while not stop.is_set():
        try:
            await prune_projections(pool)
        except Exception as exc:
            log.warning("maintenance_error", error=str(exc))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), INTERVAL_SECONDS)

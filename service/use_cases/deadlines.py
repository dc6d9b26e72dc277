"""The deadline sweeper: settles focusing operations whose ``ends_at`` has passed.

It sleeps until the earliest deadline, is woken at once by ``NOTIFY lineup_deadlines`` when a
start commits, and polls at least every ``max_sleep`` seconds in case a notification is lost.
Batches are claimed with ``FOR UPDATE ... SKIP LOCKED`` on the workspace rows, so any number of
service replicas can sweep at once; the compare-and-set in ``settle_focusing`` makes each decision
happen exactly once, including the backlog that fell due while no service ran.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from datetime import datetime
from typing import Any

import psycopg
import structlog

from service.db import operations as ops_db
from service.db.pool import Pool
from service.domain.operations import DEADLINE
from service.metrics import SWEEPS, observe_settled

log = structlog.get_logger("service.sweeper")
CHANNEL = "lineup_deadlines"


class DeadlineSweeper:
    def __init__(
        self,
        pool: Pool,
        listen_url: str,
        *,
        batch_size: int = 200,
        max_sleep: float = 1.0,
        busy_backoff: float = 0.02,
    ) -> None:
        self._pool = pool
        self._listen_url = listen_url
        self._batch_size = batch_size
        self._max_sleep = max_sleep
        self._busy_backoff = busy_backoff
        self._wake = asyncio.Event()
        # Wall-clock time of the next deadline we know of; a start whose ends_at is later needs
        # no wake-up (the sleep already ends before it).
        self._next_due: float | None = None
        self.settled_total = 0

    def wake(self) -> None:
        self._wake.set()

    async def sweep_once(self) -> list[dict[str, Any]]:
        """Settle one batch of due operations; returns the settled rows."""
        async with self._pool.connection() as conn, conn.transaction():
            due = await ops_db.claim_due(conn, self._batch_size)
            if not due:
                return []
            rows = await ops_db.settle_focusing(conn, due, DEADLINE, only_due=True)
        observe_settled(rows)
        if rows:
            SWEEPS.inc()
            self.settled_total += len(rows)
        return rows

    async def _seconds_until_next(self) -> float | None:
        async with self._pool.connection() as conn:
            seconds = await ops_db.seconds_until_next_deadline(conn)
            await conn.rollback()
            return seconds

    async def run(self, stop: asyncio.Event) -> None:
        listener = asyncio.create_task(self._listen(stop), name="deadline-listener")
        try:
            while not stop.is_set():
                try:
                    settled = await self.sweep_once()
                    if len(settled) >= self._batch_size:
                        continue
                    wait = await self._seconds_until_next()
                except (psycopg.OperationalError, psycopg.errors.AdminShutdown) as exc:
                    log.warning("sweeper_database_error", error=str(exc))
                    wait = self._max_sleep
                self._next_due = None if wait is None else time.time() + wait
                if wait is None:
                    wait = self._max_sleep
                elif wait <= 0:
                    # Due but claimed by someone else (a request or another replica): look again
                    # shortly rather than spin.
                    wait = 0 if settled else self._busy_backoff
                await self._sleep(min(wait, self._max_sleep), stop)
        finally:
            listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await listener

    async def _sleep(self, seconds: float, stop: asyncio.Event) -> None:
        if seconds <= 0:
            return
        self._wake.clear()
        waiters = [asyncio.ensure_future(self._wake.wait()), asyncio.ensure_future(stop.wait())]
        _, pending = await asyncio.wait(waiters, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        for task in waiters:
            task.cancel()
        for task in pending:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _needs_wake(self, ends_at: str) -> bool:
        if self._next_due is None:
            return True
        try:
            due = datetime.fromisoformat(ends_at.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return True
        return due < self._next_due

    async def _listen(self, stop: asyncio.Event) -> None:
        """LISTEN for committed starts; reconnect on failure (polling covers the gap)."""
        while not stop.is_set():
            try:
                async with await psycopg.AsyncConnection.connect(
                    self._listen_url, autocommit=True, application_name="lineup-sweeper-listen"
                ) as conn:
                    await conn.execute(f"LISTEN {CHANNEL}")
                    self.wake()  # anything committed before LISTEN is caught by this sweep
                    async for note in conn.notifies():
                        if self._needs_wake(note.payload):
                            self.wake()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("sweeper_listen_error", error=str(exc))
                await asyncio.sleep(1.0)

"""The deadline sweeper: settles focusing operations whose ``ends_at`` has passed.

Each claimer sleeps until the earliest deadline it knows of. A start accepted by this process
wakes it at once when it falls due earlier (``consider``, called after the start commits);
deadlines opened by other replicas are found by its poll, at least every ``max_sleep`` seconds.
A batch is one statement, ``settle_due``: it claims due operations with ``FOR UPDATE OF
workspaces SKIP LOCKED`` and settles them through ``settle_focusing_v2``, so any number of claimers
(``claimers`` here, and those of other replicas) settle side by side, and each decision happens
exactly once — including the backlog that fell due while no service ran.

On Citus (``distributed``) a lock with ``SKIP LOCKED`` must stay within one shard, so a batch is
two steps: the conversations with a due operation, read on every shard without a lock
(``due_conversations``), then each settled by ``settle_due_in``, a function distributed by its
conversation: the coordinator hands the call to the worker holding that conversation, where it
takes the conversation's lock with ``SKIP LOCKED`` (a request holding it settles what is due
itself) and applies the deadline rule. The same decision, exactly once, one conversation at a time.

A claimer whose statement fails — any error: the database gone (``OperationalError``), or one it
refuses (``ProgrammingError`` and the like, e.g. a pooler that loses a prepared statement) — logs
one ``sweeper_failed`` line per failure and tries again after a pause that doubles from 50 ms to
``max_sleep`` (``service.db.reconnect.Backoff``); it never ends but at the stop. Its rounds stop
advancing meanwhile (``lineup_background_loop_last_round_timestamp_seconds``), which an alert
watches.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

import structlog

from service.background import sleep_until
from service.clock import CLOCK
from service.db import operations as operations_db
from service.db.pool import Pool
from service.db.reconnect import Backoff
from service.metrics import SWEEPS
from service.use_cases.unit_of_work import unit_of_work
from service.wakeups import Wakeups

log = structlog.get_logger("service.sweeper")


class DeadlineSweeper:
    """A background loop (``service.background``) of ``claimers`` claimers; a round is one look
    for the next deadline."""

    name = "deadline-sweeper"

    def __init__(
        self,
        pool: Pool,
        wakeups: Wakeups,
        *,
        claimers: int = 2,
        batch_size: int = 200,
        max_sleep: float = 1.0,
        busy_backoff: float = 0.02,
        distributed: bool = False,
    ) -> None:
        self._pool = pool
        self._wakeups = wakeups
        self._claimers = claimers
        self._batch_size = batch_size
        self._max_sleep = max_sleep
        self._distributed = distributed
        self._full = False  # the last batch was full: more may be due at once
        self.interval = max_sleep  # a healthy claimer finishes a round at least this often
        self.failures = 0
        self._busy_backoff = busy_backoff
        # One event per claimer, cleared before it looks: a wake-up that arrives while it works
        # is never lost.
        self._wakes = [asyncio.Event() for _ in range(claimers)]
        # The database's time of the next deadline we know of (service.clock: the host's may be
        # off); a start whose ends_at is later needs no wake-up (the sleep already ends before it).
        self._next_due: float | None = None
        self.settled_total = 0
        # How many times a claimer has looked for the next deadline (and then gone to sleep).
        self.rounds = 0
        wakeups.on_deadline(self.consider)

    def wake(self) -> None:
        for event in self._wakes:
            event.set()

    def consider(self, deadline: datetime) -> None:
        """A start committed here: wake the claimers if it falls due before they would wake."""
        if self._next_due is None or deadline.timestamp() < self._next_due:
            self._next_due = deadline.timestamp()
            self.wake()

    async def sweep_once(self) -> list[dict[str, Any]]:
        """Settle one batch of due operations (one statement); returns the settled rows."""
        if self._distributed:
            return await self._sweep_by_conversation()
        async with unit_of_work(self._pool, self._wakeups, transaction=False) as work:
            rows = await operations_db.settle_due(work.conn, self._batch_size)
            if rows:
                work.observed(rows)
                work.then(SWEEPS.inc)
        self.settled_total += len(rows)
        self._full = len(rows) >= self._batch_size
        return rows

    async def _sweep_by_conversation(self) -> list[dict[str, Any]]:
        """On Citus: the due conversations (read on every shard), each settled on its own worker."""
        async with self._pool.connection() as conn:
            due = await operations_db.due_conversations(conn, self._batch_size)
        rows: list[dict[str, Any]] = []
        for conversation_id in due:
            async with unit_of_work(self._pool, self._wakeups, transaction=False) as work:
                settled = await operations_db.settle_due_in(work.conn, conversation_id)
                if settled:
                    work.observed(settled)
                    work.then(SWEEPS.inc)
            rows += settled
        self.settled_total += len(rows)
        self._full = len(due) >= self._batch_size
        return rows

    async def _seconds_until_next(self) -> float | None:
        async with self._pool.connection() as conn:
            return await operations_db.seconds_until_next_deadline(conn)

    async def run(self, stop: asyncio.Event) -> None:
        claimers = [
            asyncio.create_task(self._claim(wake, stop), name=f"deadline-claimer-{n}")
            for n, wake in enumerate(self._wakes)
        ]
        try:
            await asyncio.gather(*claimers)
        finally:
            for task in claimers:
                task.cancel()
            await asyncio.gather(*claimers, return_exceptions=True)

    async def _claim(self, wake: asyncio.Event, stop: asyncio.Event) -> None:
        backoff = Backoff(last=self._max_sleep)
        while not stop.is_set():
            wake.clear()
            settled: list[dict[str, Any]] = []
            try:
                settled = await self.sweep_once()
                if self._full:
                    self.rounds += 1
                    continue
                wait = await self._seconds_until_next()
                self.rounds += 1
                backoff.reset()
            except Exception as exc:
                self.failures += 1
                pause = backoff.pause()
                log.warning(
                    "sweeper_failed",
                    error=str(exc).strip() or repr(exc),
                    error_type=type(exc).__name__,
                    retry_in=round(pause, 3),
                )
                await sleep_until(pause, wake, stop)
                continue
            self._next_due = None if wait is None else CLOCK.now() + wait
            if wait is None:
                wait = self._max_sleep
            elif wait <= 0:
                # Due but held by someone else (a request, another claimer or replica): look
                # again shortly rather than spin.
                wait = 0 if settled else self._busy_backoff
            await sleep_until(min(wait, self._max_sleep), wake, stop)

"""Recording: the relay's writers take finished attempts' outcomes in batches and record each batch
in one statement, fenced by the lease; a row stays held until its outcome is recorded."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from uuid import UUID

import psycopg
import structlog

from relay import claims as claims_db
from relay.claims import Claim, Outcome
from relay.database import RelayPool
from relay.metrics import RelayMetrics

log = structlog.get_logger("relay")

WRITE_BATCH = 500
MAX_ERROR_PAUSE = 5.0


class Outcomes:
    """Finished attempts waiting for a writer: ``put`` appends, a writer ``take``s up to a batch.
    A list and an event (one loop, no lock): about a third of what an ``asyncio.Queue`` costs per
    item with its per-item ``get`` and ``task_done``."""

    def __init__(self) -> None:
        self._waiting: list[Outcome] = []
        self._ready = asyncio.Event()
        self._unrecorded = 0
        self._all_recorded = asyncio.Event()
        self._all_recorded.set()

    def qsize(self) -> int:
        """Outcomes not yet recorded (waiting, or in a batch being written)."""
        return self._unrecorded

    def put(self, outcome: Outcome) -> None:
        self._waiting.append(outcome)
        self._unrecorded += 1
        self._all_recorded.clear()
        self._ready.set()

    async def take(self, at_most: int) -> list[Outcome]:
        """At least one outcome, at most ``at_most``, oldest first."""
        while not self._waiting:
            self._ready.clear()
            await self._ready.wait()
        batch = self._waiting[:at_most]
        del self._waiting[:at_most]
        return batch

    def recorded(self, count: int) -> None:
        self._unrecorded -= count
        if not self._unrecorded:
            self._all_recorded.set()

    async def join(self) -> None:
        """Until every outcome put so far is recorded."""
        await self._all_recorded.wait()


class OutcomeWriter:
    """A background loop (``service.background``): one round is one batch recorded. It goes on
    until cancelled: the relay cancels its writers once its claimer has returned, its drain having
    waited for every outcome to be recorded (``cancel_last``)."""

    def __init__(
        self,
        number: int,
        *,
        pool: RelayPool,
        relay_id: str,
        metrics: RelayMetrics,
        outcomes: Outcomes,
        held: dict[UUID, Claim],
        recorded: Callable[[], None],
        on_node: bool = False,
    ) -> None:
        self.name = f"relay-writer-{number}"
        self._pool = pool
        self._relay_id = relay_id
        self._metrics = metrics
        self._outcomes = outcomes
        self._held = held
        self._recorded = recorded
        self._on_node = on_node
        self._rounds = 0

    @property
    def rounds(self) -> int:
        return self._rounds

    async def run(self, stop: asyncio.Event) -> None:
        while True:
            batch = await self._outcomes.take(WRITE_BATCH)
            await self.record(batch)
            self._outcomes.recorded(len(batch))
            self._rounds += 1

    async def record(self, batch: list[Outcome]) -> None:
        pause = 0.05
        while True:
            try:
                async with self._pool.connection() as conn:
                    recorded = await claims_db.record_outcomes(
                        conn, self._relay_id, batch, on_node=self._on_node
                    )
                break
            except psycopg.Error as exc:
                # Safe to repeat: the statement recognises attempts it already recorded.
                self._metrics.database_errors.inc()
                log.warning("relay_record_failed", error=str(exc).strip(), rows=len(batch))
                await asyncio.sleep(pause)
                pause = min(MAX_ERROR_PAUSE, pause * 2)
        held = self._held
        outcomes: Counter[str] = Counter()
        for outcome in batch:
            event_id = outcome.claim.event_id
            held.pop(event_id, None)
            recorded_as = recorded.get(event_id, "already_recorded")
            outcomes[recorded_as] += 1
            if recorded_as != "delivered":
                level = log.info if recorded_as == "retry" else log.warning
                level(
                    f"relay_attempt_{recorded_as}",
                    event_id=str(event_id),
                    tool_call_id=outcome.claim.tool_call_id,
                    attempt=outcome.claim.attempts,
                    error=outcome.error,
                    retry_in=round(outcome.delay, 3) if recorded_as == "retry" else None,
                )
        for recorded_as, count in outcomes.items():
            self._metrics.attempts.labels(recorded_as).inc(count)
        self._metrics.in_flight.set(len(held))
        self._recorded()

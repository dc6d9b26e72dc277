"""Recording: the relay's writers take finished attempts' outcomes in batches and record each batch
in one statement, fenced by the lease; a row stays held until its outcome is recorded."""

from __future__ import annotations

import asyncio
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
        outcomes: asyncio.Queue[Outcome],
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
            batch = [await self._outcomes.get()]
            while len(batch) < WRITE_BATCH and not self._outcomes.empty():
                batch.append(self._outcomes.get_nowait())
            await self.record(batch)
            for _ in batch:
                self._outcomes.task_done()
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
        for outcome in batch:
            event_id = outcome.claim.event_id
            self._held.pop(event_id, None)
            recorded_as = recorded.get(event_id, "already_recorded")
            self._metrics.attempts.labels(recorded_as).inc()
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
        self._metrics.in_flight.set(len(self._held))
        self._recorded()

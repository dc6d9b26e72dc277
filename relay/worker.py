"""The relay loop: claim due rows, deliver them concurrently, record every outcome in batches.

Three things run side by side: the claimer (woken by NOTIFY, by finished attempts, or by its poll),
one delivery task per claimed row (at most ``concurrency`` POSTs in flight), and the writers, which
record finished attempts in batches, two statements at a time. A row stays held, and its lease
live, until its outcome is recorded; the next row of its conversation becomes claimable only then.
A finished POST frees its slot at once, so recording never stalls delivering; the rows held but
not yet recorded are bounded too (``MAX_HELD_PER_SLOT`` per slot).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Coroutine
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import psycopg
import structlog

from relay import circuit
from relay import claims as claims_db
from relay.backoff import parse_retry_after, retry_delay
from relay.circuit import FailureStreak, is_endpoint_failure
from relay.claims import Claim, Outcome
from relay.config import RelayConfig, redacted
from relay.database import RelayPool, relay_pool
from relay.delivery import Attempt, Deliverer
from relay.metrics import RelayMetrics
from relay.policy import AttemptResult, describe, verdict
from relay.probes import ProbeServer
from relay.retention import Retention, keep_pruning
from relay.signing import Signer
from relay.wakeup import listen

log = structlog.get_logger("relay")

WRITE_BATCH = 500
WRITERS = 2
MAX_HELD_PER_SLOT = 4
MAX_ERROR_PAUSE = 5.0


class Relay:
    def __init__(self, config: RelayConfig, metrics: RelayMetrics | None = None) -> None:
        self.config = config
        self.metrics = metrics or RelayMetrics()
        self.probe_port: int | None = None
        self._wake = asyncio.Event()
        self._held: dict[UUID, Claim] = {}
        self._outcomes: asyncio.Queue[Outcome] = asyncio.Queue()
        self._deliveries: set[asyncio.Task[None]] = set()
        self._orphans_possible = False
        self._broken = False
        self._streak = FailureStreak(config.circuit_failures)
        self._opening = False
        self._hold_asked_until = 0.0
        self._side_tasks: set[asyncio.Task[None]] = set()
        # An open (or a Retry-After hold) on its way to the database: no claims until it lands.
        self._gate_change: asyncio.Task[None] | None = None
        self._pool: RelayPool
        self._deliverer: Deliverer
        # Below this much free capacity the claimer waits rather than claim a handful of rows.
        self._min_claim = max(1, min(config.batch_size, config.concurrency) // 4)
        self._max_held = config.concurrency * MAX_HELD_PER_SLOT

    def wake(self) -> None:
        self._wake.set()

    async def run(self, stop: asyncio.Event) -> None:
        """Deliver until ``stop`` is set; then finish or hand back what is in flight and return."""
        cfg = self.config
        failures: list[BaseException] = []
        # Closed in reverse order, each even if an earlier one fails: helpers, leases, HTTP, pool.
        async with contextlib.AsyncExitStack() as resources:
            await self._open(resources)
            resources.push_async_callback(_cancel, self._start_helpers(stop, failures))
            log.info(
                "relay_started",
                relay_id=cfg.relay_id,
                webhook_url=redacted(cfg.webhook_url),
                secrets=len(cfg.webhook_secrets),
                concurrency=cfg.concurrency,
                lease_seconds=cfg.lease_seconds,
                poll_only=cfg.poll_only,
                probe_port=self.probe_port,
            )
            await self._release(uncount=0)  # leases an earlier process with this relay id left behind
            await self._ensure_endpoint()
            await self._claim_loop(stop)
            await self._drain()
        log.info("relay_stopped", relay_id=cfg.relay_id, unrecorded=len(self._held))
        if failures:
            raise RuntimeError("a relay helper task failed") from failures[0]

    async def _open(self, resources: contextlib.AsyncExitStack) -> None:
        cfg = self.config
        self._pool = relay_pool(cfg.database_url)
        await self._pool.open(wait=False)
        resources.push_async_callback(self._pool.close)
        if cfg.metrics_port:
            probes = ProbeServer(self.metrics, self._pool, host=cfg.metrics_host, port=cfg.metrics_port)
            await probes.start()
            resources.push_async_callback(probes.close)
            self.probe_port = probes.port
        signer = Signer(cfg.webhook_secrets)
        self._deliverer = Deliverer(cfg.webhook_url, signer, timeout=cfg.timeout, concurrency=cfg.concurrency)
        resources.push_async_callback(self._deliverer.aclose)
        resources.push_async_callback(self._release, uncount=0)
        resources.push_async_callback(self._release_probe)

    def _start_helpers(self, stop: asyncio.Event, failures: list[BaseException]) -> list[asyncio.Task[None]]:
        helpers = [
            *(_spawn(self._write_loop(), f"relay-writer-{n}") for n in range(WRITERS)),
            _spawn(keep_pruning(self._pool, self._retention(), self.metrics), "relay-retention"),
        ]
        if not self.config.poll_only:
            helpers.append(_spawn(listen(self.config.database_url, self.wake, stop), "relay-listen"))

        def fail_fast(task: asyncio.Task[None]) -> None:
            # A helper only ends by cancellation; anything else is a bug. Stop (and exit non-zero)
            # rather than keep claiming rows whose outcomes nobody records.
            if not task.cancelled() and (error := task.exception()) is not None:
                log.error("relay_helper_failed", task=task.get_name(), error=repr(error))
                failures.append(error)
                self._broken = True
                stop.set()

        for task in helpers:
            task.add_done_callback(fail_fast)
        return helpers

    def _retention(self) -> Retention:
        cfg = self.config
        return Retention(cfg.retention_days, cfg.dead_retention_days, cfg.relay_id)

    async def _release_probe(self) -> None:
        """A probe this relay still holds goes back at once, not when its lease runs out."""
        try:
            async with self._pool.connection() as conn:
                await circuit.release_probe(conn, self.config.endpoint, self.config.relay_id)
        except psycopg.Error as exc:
            log.warning("relay_probe_release_failed", error=str(exc).strip())

    async def _ensure_endpoint(self) -> None:
        try:
            async with self._pool.connection() as conn:
                await circuit.ensure(conn, self.config.endpoint)
        except psycopg.Error as exc:
            log.warning("relay_endpoint_check_failed", error=str(exc).strip())

    # -- claiming -------------------------------------------------------------------------------

    async def _claim_loop(self, stop: asyncio.Event) -> None:
        cfg = self.config
        errors = 0
        while not stop.is_set():
            self._wake.clear()
            free = min(cfg.concurrency - len(self._deliveries), self._max_held - len(self._held))
            if self._held and free < self._min_claim:
                await self._sleep(stop, cfg.poll_interval)
                continue
            limit = min(cfg.batch_size, free)
            if self._gate_change is not None and not self._gate_change.done():
                await asyncio.wait({self._gate_change}, timeout=MAX_ERROR_PAUSE)
            try:
                if self._orphans_possible:
                    await self._release(uncount=1, keep=list(self._held))
                    self._orphans_possible = False
                async with self._pool.connection() as conn:
                    claimed = await claims_db.claim(
                        conn, cfg.relay_id, limit, cfg.lease_seconds, busy=list(self._held)
                    )
            except psycopg.Error as exc:
                # The claim may have committed with its reply lost: hand back such rows before the
                # next claim instead of leaving them to their lease.
                self._orphans_possible = True
                errors += 1
                self.metrics.database_errors.inc()
                log.warning("relay_claim_failed", error=str(exc).strip(), consecutive=errors)
                await self._sleep(stop, min(MAX_ERROR_PAUSE, 0.05 * 2**errors))
                continue
            errors = 0
            if claimed.circuit_closed_since is not None:
                self._streak.circuit_closed_at(claimed.circuit_closed_since)
            for row in claimed:
                self._start_delivery(row)
            if len(claimed) == limit:
                continue
            await self._sleep(stop, await self._idle())

    async def _idle(self) -> float:
        """Nothing (more) to claim: probe an open circuit if it is time, else how long to wait —
        until the next retry or probe falls due, at most the poll interval."""
        cfg = self.config
        try:
            async with self._pool.connection() as conn:
                seen = await circuit.look(conn, cfg.endpoint)
                if not seen.probe_due:
                    return seen.wait(cfg.poll_interval)
                won, probe = await circuit.take_probe(conn, cfg.endpoint, cfg.relay_id, cfg.lease_seconds)
                if won and probe is None:
                    await circuit.release_probe(conn, cfg.endpoint, cfg.relay_id)
        except psycopg.Error:
            return cfg.poll_interval
        if probe is None:
            return cfg.poll_interval
        self.metrics.circuit_transitions.labels("half_open").inc()
        log.info("delivery_circuit_probe", relay_id=cfg.relay_id, event_id=str(probe.event_id))
        self._start_delivery(probe)
        return 0.0

    async def _sleep(self, stop: asyncio.Event, seconds: float) -> None:
        waiters = [_spawn(self._wake.wait(), "wake"), _spawn(stop.wait(), "stop")]
        await asyncio.wait(waiters, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        for task in waiters:
            task.cancel()
        await asyncio.gather(*waiters, return_exceptions=True)

    async def _release(self, *, uncount: int, keep: list[UUID] | None = None) -> None:
        try:
            async with self._pool.connection() as conn:
                released = await claims_db.release(
                    conn, self.config.relay_id, keep=keep or [], uncount=uncount
                )
        except psycopg.Error as exc:
            if uncount:
                raise
            log.warning("relay_release_failed", error=str(exc).strip())
            return
        if released:
            log.info("relay_released_leases", rows=len(released))

    # -- delivering -----------------------------------------------------------------------------

    def _start_delivery(self, claim: Claim) -> None:
        self._held[claim.event_id] = claim
        self.metrics.in_flight.set(len(self._held))
        task = _spawn(self._deliver(claim), f"deliver-{claim.event_id}")
        self._deliveries.add(task)
        task.add_done_callback(self._delivered)

    def _delivered(self, task: asyncio.Task[None]) -> None:
        self._deliveries.discard(task)
        if self.config.concurrency - len(self._deliveries) >= self._min_claim:
            self.wake()

    async def _deliver(self, claim: Claim) -> None:
        started_at = datetime.now(UTC)
        try:
            attempt = await self._deliverer.attempt(claim)
            if claim.probe:
                await self._probed(attempt.result)
        except asyncio.CancelledError:
            # Stopped mid-attempt: the Agent may or may not have it. Record the attempt and make
            # the row due at once for any relay.
            cut = AttemptResult(None, "RelayShutdown", "the relay stopped during the attempt")
            self._outcomes.put_nowait(
                self._outcome(claim, Attempt(started_at, _ms_since(started_at), cut), 0.0)
            )
            raise
        except Exception as exc:
            # A bug here must not strand the row until its lease expires.
            log.exception("relay_delivery_bug", event_id=str(claim.event_id))
            failed = AttemptResult(None, type(exc).__name__, str(exc))
            attempt = Attempt(started_at, _ms_since(started_at), failed)
        self._outcomes.put_nowait(self._outcome(claim, attempt))

    def _outcome(self, claim: Claim, attempt: Attempt, delay: float | None = None) -> Outcome:
        cfg = self.config
        result = attempt.result
        decided = verdict(result, claim.attempts, cfg.max_attempts)
        refund = 0
        if claim.probe and (delay is not None or is_endpoint_failure(result)):
            # The endpoint failed, not the row: the attempt is given back, and the row waits
            # behind the circuit like the others (due whenever it closes).
            decided, delay, refund = "retry", 0.0, 1
        elif delay is not None:
            decided = "retry"
        else:
            if not claim.probe:
                self._observe(claim, attempt)
            if decided == "retry":
                delay = retry_delay(
                    claim.attempts, base=cfg.backoff_base, cap=cfg.backoff_max, retry_after=result.retry_after
                )
        self.metrics.attempt_seconds.observe(attempt.duration_ms / 1000)
        if decided == "delivered":
            self.metrics.commit_to_delivery.observe((datetime.now(UTC) - claim.created_at).total_seconds())
        return Outcome(
            claim=claim,
            verdict=decided,
            delay=delay or 0.0,
            error=None if decided == "delivered" else describe(result),
            started_at=attempt.started_at,
            duration_ms=attempt.duration_ms,
            status_code=result.status_code,
            error_class=result.error_class,
            excerpt=result.excerpt,
            refund=refund,
        )

    # -- the endpoint's circuit -----------------------------------------------------------------

    def _observe(self, claim: Claim, attempt: Attempt) -> None:
        """Open the circuit when the endpoint fails as a whole, or hold it as a Retry-After asks."""
        result = attempt.result
        opens = self._streak.observe(claim.event_id, attempt.started_at, result)
        asked = parse_retry_after(result.retry_after) if is_endpoint_failure(result) else None
        if asked is not None and asked > 0:
            hold = min(asked, self.config.backoff_max)
            until = time.monotonic() + hold
            if until > self._hold_asked_until + 1.0:  # answers in flight together ask once
                self._hold_asked_until = until
                opening = self._open_circuit(hold, describe(result), retry_after=hold)
                self._gate_change = self._side_task(opening, "circuit-hold")
        elif opens and not self._opening:
            self._opening = True
            hold = self.config.circuit_probe_seconds
            self._gate_change = self._side_task(self._open_circuit(hold, describe(result)), "circuit-open")

    async def _open_circuit(self, hold: float, error: str, *, retry_after: float | None = None) -> None:
        cfg = self.config
        try:
            async with self._pool.connection() as conn:
                changed = await circuit.open_circuit(
                    conn, cfg.endpoint, hold=hold, error=error, extend=retry_after is not None
                )
        except psycopg.Error as exc:
            log.warning("relay_circuit_open_failed", error=str(exc).strip())
            return
        finally:
            self._opening = False
        if changed is not None and changed[0] == "closed":
            self.metrics.circuit_transitions.labels("open").inc()
            log.warning(
                "delivery_circuit_opened",
                relay_id=cfg.relay_id,
                endpoint=cfg.endpoint,
                failures=self._streak.failures,
                rows=len(self._streak.rows),
                retry_after=retry_after,
                probe_in=round(hold, 3),
                error=error,
            )
        self._streak.reset()

    async def _probed(self, result: AttemptResult) -> None:
        """Close the circuit if the probe was answered, else open it again until the next probe."""
        try:
            if is_endpoint_failure(result):
                await self._probe_failed(result)
            else:
                await self._probe_answered(result)
        except psycopg.Error as exc:
            # The probe's lease runs out and another probe goes then.
            log.warning("relay_circuit_probe_unrecorded", error=str(exc).strip())

    async def _probe_answered(self, result: AttemptResult) -> None:
        cfg = self.config
        async with self._pool.connection() as conn:
            closed = await circuit.close(conn, cfg.endpoint, cfg.relay_id)
        if closed is None:
            return
        open_seconds, since, made_due = closed
        self._streak.circuit_closed_at(since)
        self.metrics.circuit_transitions.labels("closed").inc()
        log.info(
            "delivery_circuit_closed",
            relay_id=cfg.relay_id,
            endpoint=cfg.endpoint,
            open_seconds=round(open_seconds, 3),
            made_due=made_due,
            status_code=result.status_code,
        )
        self.wake()

    async def _probe_failed(self, result: AttemptResult) -> None:
        cfg = self.config
        asked = parse_retry_after(result.retry_after) or 0.0
        hold = max(cfg.circuit_probe_seconds, min(asked, cfg.backoff_max))
        async with self._pool.connection() as conn:
            reopened = await circuit.reopen(
                conn, cfg.endpoint, cfg.relay_id, hold=hold, error=describe(result)
            )
        if reopened:
            self.metrics.circuit_transitions.labels("open").inc()
            log.warning(
                "delivery_circuit_probe_failed",
                relay_id=cfg.relay_id,
                endpoint=cfg.endpoint,
                probe_in=round(hold, 3),
                error=describe(result),
            )

    def _side_task(self, coro: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        task = _spawn(coro, name)
        self._side_tasks.add(task)
        task.add_done_callback(self._side_tasks.discard)
        return task

    # -- recording ------------------------------------------------------------------------------

    async def _write_loop(self) -> None:
        while True:
            batch = [await self._outcomes.get()]
            while len(batch) < WRITE_BATCH and not self._outcomes.empty():
                batch.append(self._outcomes.get_nowait())
            await self._record(batch)
            for _ in batch:
                self._outcomes.task_done()

    async def _record(self, batch: list[Outcome]) -> None:
        relay_id = self.config.relay_id
        pause = 0.05
        while True:
            try:
                async with self._pool.connection() as conn:
                    recorded = await claims_db.record_outcomes(conn, relay_id, batch)
                break
            except psycopg.Error as exc:
                # Safe to repeat: the statement recognises attempts it already recorded.
                self.metrics.database_errors.inc()
                log.warning("relay_record_failed", error=str(exc).strip(), rows=len(batch))
                await asyncio.sleep(pause)
                pause = min(MAX_ERROR_PAUSE, pause * 2)
        for outcome in batch:
            event_id = outcome.claim.event_id
            self._held.pop(event_id, None)
            recorded_as = recorded.get(event_id, "already_recorded")
            self.metrics.attempts.labels(recorded_as).inc()
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
        self.metrics.in_flight.set(len(self._held))
        self.wake()

    # -- stopping -------------------------------------------------------------------------------

    async def _drain(self) -> None:
        """Let in-flight attempts finish for the grace period, cut the rest, record every outcome."""
        cfg = self.config
        loop = asyncio.get_running_loop()
        deadline = loop.time() + cfg.shutdown_grace
        if self._deliveries:
            log.info("relay_draining", in_flight=len(self._deliveries))
            _, unfinished = await asyncio.wait(set(self._deliveries), timeout=cfg.shutdown_grace)
            for task in unfinished:
                task.cancel()
            await asyncio.gather(*unfinished, return_exceptions=True)
        if self._broken:
            return
        if self._side_tasks:
            await asyncio.wait(set(self._side_tasks), timeout=max(deadline - loop.time(), 1.0))
        try:
            async with asyncio.timeout(max(deadline - loop.time(), 2.0)):
                await self._outcomes.join()
        except TimeoutError:
            log.warning("relay_outcomes_unrecorded", rows=self._outcomes.qsize())


async def _cancel(tasks: list[asyncio.Task[None]]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def _spawn(coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
    return asyncio.create_task(coro, name=name)


def _ms_since(moment: datetime) -> int:
    return max(0, round((datetime.now(UTC) - moment).total_seconds() * 1000))

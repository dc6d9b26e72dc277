"""The relay loop: claim due rows, deliver them concurrently, record every outcome in batches.

Three things run side by side: the claimer (woken by NOTIFY, by finished attempts, or by its poll),
one delivery task per claimed row (at most ``concurrency`` POSTs in flight), and the writers, which
record finished attempts in batches, two statements at a time. A row stays held, and its lease
live, until its outcome is recorded; the next row of its conversation becomes claimable only then.
A finished POST frees its slot at once, so recording never stalls delivering; the rows held but
not yet recorded are bounded too (``MAX_HELD_PER_SLOT`` per slot).

The claimer is this module's; the writers (``relay.recording``), the retention
(``relay.retention``) and the LISTEN loop (``relay.wakeup``) are background loops in the shared
shape (``service.background``), started together and stopped together by one ``Background``. The
endpoint's circuit, as this relay sees it, is ``relay.endpoint_circuit``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import psycopg
import structlog

from relay import circuit
from relay import claims as claims_db
from relay.backoff import retry_delay
from relay.circuit import is_endpoint_failure
from relay.claims import Claim, Outcome
from relay.config import RelayConfig, redacted
from relay.database import RelayPool, relay_pool
from relay.delivery import Attempt, Deliverer
from relay.endpoint_circuit import EndpointCircuit
from relay.metrics import RelayMetrics
from relay.policy import AttemptResult, describe, verdict
from relay.probes import ProbeServer
from relay.recording import MAX_ERROR_PAUSE, OutcomeWriter
from relay.retention import Pruning, Retention
from relay.signing import Signer
from relay.wakeup import OutboxListener
from service.background import Background, Loop

log = structlog.get_logger("relay")

WRITERS = 2
MAX_HELD_PER_SLOT = 4


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
        self._pool: RelayPool
        self._deliverer: Deliverer
        self._circuit: EndpointCircuit
        # Below this much free capacity the claimer waits rather than claim a handful of rows.
        self._min_claim = max(1, min(config.batch_size, config.concurrency) // 4)
        self._max_held = config.concurrency * MAX_HELD_PER_SLOT

    def wake(self) -> None:
        self._wake.set()

    async def run(self, stop: asyncio.Event) -> None:
        """Deliver until ``stop`` is set; then finish or hand back what is in flight and return."""
        cfg = self.config
        failures: list[BaseException] = []

        def helper_failed(loop: Loop, error: BaseException) -> None:
            # A helper ends at the stop or by cancellation; an error is a bug. Stop (and exit non-zero)
            # rather than keep claiming rows whose outcomes nobody records.
            log.error("relay_helper_failed", task=loop.name, error=repr(error))
            failures.append(error)
            self._broken = True
            stop.set()

        # Closed in reverse order, each even if an earlier one fails: helpers, leases, HTTP, pool.
        async with contextlib.AsyncExitStack() as resources:
            await self._open(resources)
            # The helpers see ``stop`` too, and are cancelled once the drain has recorded what it could.
            helpers = Background(self._helpers(), stop, on_failure=helper_failed, cancel_at_stop=True)
            await resources.enter_async_context(helpers)
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
            await self._circuit.ensure()
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
        self._circuit = EndpointCircuit(cfg, self._pool, self.metrics, self.wake)
        resources.push_async_callback(self._circuit.release_probe)

    def _helpers(self) -> list[Loop]:
        """The loops beside the claimer: the writers, the retention, and (unless polling only) the
        LISTEN loop that wakes the claimer."""
        cfg = self.config
        helpers: list[Loop] = [
            OutcomeWriter(
                n,
                pool=self._pool,
                relay_id=cfg.relay_id,
                metrics=self.metrics,
                outcomes=self._outcomes,
                held=self._held,
                recorded=self.wake,
            )
            for n in range(WRITERS)
        ]
        retention = Retention(cfg.retention_days, cfg.dead_retention_days, cfg.relay_id)
        helpers.append(Pruning(self._pool, retention, self.metrics))
        if not cfg.poll_only:
            helpers.append(OutboxListener(cfg.database_url, self.wake))
        return helpers

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
            await self._circuit.changed(at_most=MAX_ERROR_PAUSE)
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
                self._circuit.closed_since(claimed.circuit_closed_since)
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
                await self._circuit.probed(attempt.result)
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
                self._circuit.observe(claim, attempt)
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
        await self._circuit.settle(at_most=max(deadline - loop.time(), 1.0))
        try:
            async with asyncio.timeout(max(deadline - loop.time(), 2.0)):
                await self._outcomes.join()
        except TimeoutError:
            log.warning("relay_outcomes_unrecorded", rows=self._outcomes.qsize())


def _spawn(coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
    return asyncio.create_task(coro, name=name)


def _ms_since(moment: datetime) -> int:
    return max(0, round((datetime.now(UTC) - moment).total_seconds() * 1000))

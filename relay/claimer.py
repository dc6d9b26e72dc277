"""The claimer: claims due rows, sends each (at most ``concurrency`` POSTs in flight, over the
relay's pooled connections: ``relay.delivery``), and hands every attempt's outcome to the writers
(``relay.recording``) from the callback that ends the attempt — no task per delivery. A row stays
held, and its lease live, until its outcome is recorded; the next row of its conversation becomes
claimable only then. A finished POST frees its slot at once, so recording never stalls delivering;
the rows held but not yet recorded are bounded too (``MAX_HELD_PER_SLOT`` per slot).

Woken by NOTIFY (``relay.wakeup``), by finished attempts and recorded outcomes, or by its poll. At
the stop it drains: in-flight attempts finish for the grace period, the rest are cut, and it waits
for every outcome to be recorded.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import psycopg
import structlog

from relay import circuit
from relay import claims as claims_db
from relay.backoff import retry_delay
from relay.circuit import is_endpoint_wide
from relay.claims import Claim, Outcome
from relay.clock import database_time
from relay.config import RelayConfig
from relay.database import RelayPool
from relay.delivery import Attempt, Deliverer
from relay.endpoint_circuit import EndpointCircuit
from relay.metrics import RelayMetrics
from relay.policy import AttemptResult, describe, verdict
from relay.recording import MAX_ERROR_PAUSE, Outcomes
from service.background import sleep_until

log = structlog.get_logger("relay")

MAX_HELD_PER_SLOT = 4
# A held row whose claim is this close to its lease's end is left out of the next claims
# (``claims.claim``'s ``busy``): its lease may have run out in the database.
LEASE_MARGIN = 2.0
SHUTDOWN = "RelayShutdown"


class Claimer:
    """A background loop (``service.background``): a round is one claim; it returns after the
    drain, once ``stop`` is set."""

    name = "relay-claimer"

    def __init__(
        self,
        config: RelayConfig,
        metrics: RelayMetrics,
        *,
        pool: RelayPool,
        deliverer: Deliverer,
        circuit: EndpointCircuit,
    ) -> None:
        self.config = config
        self.metrics = metrics
        self._pool = pool
        self._deliverer = deliverer
        self._circuit = circuit
        self._wake = asyncio.Event()
        self._rounds = 0
        #: What this relay holds: claimed, and not yet recorded.
        self.held: dict[UUID, Claim] = {}
        #: Finished attempts waiting for a writer.
        self.outcomes = Outcomes()
        #: A loop beside it failed: the drain records nothing more.
        self.broken = False
        self._in_flight = 0
        self._all_answered: asyncio.Event | None = None  # made by the drain
        self._probes: set[asyncio.Task[None]] = set()
        self._orphans_possible = False
        # Below this much free capacity the claimer waits rather than claim a handful of rows.
        self._min_claim = max(1, min(config.batch_size, config.concurrency) // 4)
        self._max_held = config.concurrency * MAX_HELD_PER_SLOT

    @property
    def rounds(self) -> int:
        return self._rounds

    def wake(self) -> None:
        self._wake.set()

    async def run(self, stop: asyncio.Event) -> None:
        """Claim and deliver until ``stop``; then finish or hand back what is in flight."""
        await self._claim(stop)
        await self._drain()

    # -- claiming -------------------------------------------------------------------------------

    async def _claim(self, stop: asyncio.Event) -> None:
        cfg = self.config
        errors = 0
        while not stop.is_set():
            self._wake.clear()
            self._rounds += 1
            free = min(cfg.concurrency - self._in_flight, self._max_held - len(self.held))
            if self.held and free < self._min_claim:
                await self._sleep(stop, cfg.poll_interval)
                continue
            limit = min(cfg.batch_size, free)
            await self._circuit.changed(at_most=MAX_ERROR_PAUSE)
            try:
                if self._orphans_possible:
                    await self.release(uncount=1, keep=list(self.held))
                    self._orphans_possible = False
                busy = lease_ending(self.held, cfg.lease_seconds, time.monotonic())
                seen: circuit.Look | None = None
                async with self._pool.connection() as conn:
                    if cfg.on_node:
                        claimed = await claims_db.claim(
                            conn, cfg.relay_id, limit, cfg.lease_seconds, busy, on_node=True
                        )
                    else:
                        claimed, seen = await circuit.claim_and_look(
                            conn, cfg.relay_id, limit, cfg.lease_seconds, busy, endpoint=cfg.endpoint
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
            self.metrics.in_flight.set(len(self.held))
            if len(claimed) == limit:
                continue
            await self._sleep(stop, await self._idle(seen))

    async def _idle(self, seen: circuit.Look | None = None) -> float:
        """Nothing (more) to claim: probe an open circuit if it is time, else how long to wait —
        until the next retry or probe falls due, at most the poll interval. ``seen``: the look the
        claim made in its round trip (``circuit.claim_and_look``); None: look now."""
        cfg = self.config
        if seen is not None and not seen.probe_due:
            return seen.wait(cfg.poll_interval)
        try:
            async with self._pool.connection() as conn:
                if seen is None:
                    seen = await circuit.look(conn, cfg.endpoint, on_node=cfg.on_node)
                if not seen.probe_due:
                    return seen.wait(cfg.poll_interval)
                won, probe = await circuit.take_probe(
                    conn, cfg.endpoint, cfg.relay_id, cfg.lease_seconds, on_node=cfg.on_node
                )
                if won and probe is None:
                    await circuit.release_probe(conn, cfg.endpoint, cfg.relay_id)
        except psycopg.Error:
            return cfg.poll_interval
        if probe is None:
            return cfg.poll_interval
        self.metrics.circuit_transitions.labels("half_open").inc()
        log.info("delivery_circuit_probe", relay_id=cfg.relay_id, event_id=str(probe.event_id))
        self._start_delivery(probe)
        self.metrics.in_flight.set(len(self.held))
        return 0.0

    async def _sleep(self, stop: asyncio.Event, seconds: float) -> None:
        await sleep_until(seconds, self._wake, stop)

    async def release(self, *, uncount: int, keep: list[UUID] | None = None) -> None:
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
        self.held[claim.event_id] = claim
        self._in_flight += 1
        try:
            self._deliverer.send(claim, self._attempted)
        except Exception as exc:
            # A bug here must not strand the row until its lease expires.
            log.exception("relay_delivery_bug", event_id=str(claim.event_id))
            failed = AttemptResult(None, type(exc).__name__, str(exc))
            self._attempted(claim, Attempt(self._database_now(claim), 0, failed))

    def _attempted(self, claim: Claim, attempt: Attempt) -> None:
        """An attempt has ended (answered, failed, or cut by the stop): its outcome goes to the
        writers, and its slot is free."""
        self._in_flight -= 1
        if self._in_flight == 0 and self._all_answered is not None:
            self._all_answered.set()
        elif self.config.concurrency - self._in_flight >= self._min_claim:
            self.wake()
        if attempt.result.error_class == SHUTDOWN:
            # Stopped mid-attempt: the Agent may or may not have it. Record the attempt and make
            # the row due at once for any relay.
            self.outcomes.put(self._outcome(claim, attempt, 0.0))
        elif claim.probe:
            task = _spawn(self._probed(claim, attempt), f"probe-{claim.event_id}")
            self._probes.add(task)
            task.add_done_callback(self._probes.discard)
        else:
            try:
                outcome = self._outcome(claim, attempt)
            except Exception as exc:
                log.exception("relay_delivery_bug", event_id=str(claim.event_id))
                failed = AttemptResult(None, type(exc).__name__, str(exc))
                outcome = self._outcome(claim, Attempt(attempt.started_at, attempt.duration_ms, failed))
            self.outcomes.put(outcome)

    async def _probed(self, claim: Claim, attempt: Attempt) -> None:
        """The probe's answer closes or reopens the circuit before its outcome is recorded."""
        try:
            await self._circuit.probed(attempt.result)
        finally:
            self.outcomes.put(self._outcome(claim, attempt))

    def _database_now(self, claim: Claim) -> datetime:
        """The database's clock now, read from the claim's lease (``relay.clock``): the host's may be
        off, and ``created_at`` and a receiver's ``Retry-After`` date are not the host's."""
        return datetime.fromtimestamp(database_time(claim, self.config.lease_seconds), UTC)

    def _outcome(self, claim: Claim, attempt: Attempt, delay: float | None = None) -> Outcome:
        cfg = self.config
        result = attempt.result
        decided = verdict(result, claim.attempts, cfg.max_attempts)
        refund = 0
        if claim.probe and (delay is not None or is_endpoint_wide(result)):
            # The endpoint failed, not the row: the attempt is given back, and the row waits
            # behind the circuit like the others (due whenever it closes). A probe the endpoint
            # answered about the row (a 500, say) is the row's attempt, below: counted, backed off.
            decided, delay, refund = "retry", 0.0, 1
        elif delay is not None:
            decided = "retry"
        else:
            if not claim.probe:
                self._circuit.observe(claim, attempt)
            if decided == "retry":
                delay = retry_delay(
                    claim.attempts,
                    base=cfg.backoff_base,
                    cap=cfg.backoff_max,
                    retry_after=result.retry_after,
                    now=self._database_now(claim),  # a Retry-After date, against the database's clock
                )
        self.metrics.attempt_seconds.observe(attempt.duration_ms / 1000)
        if decided == "delivered":
            since_commit = self._database_now(claim) - claim.created_at
            self.metrics.commit_to_delivery.observe(since_commit.total_seconds())
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
        if self._in_flight:
            log.info("relay_draining", in_flight=self._in_flight)
            self._all_answered = asyncio.Event()
            try:
                async with asyncio.timeout(cfg.shutdown_grace):
                    await self._all_answered.wait()
            except TimeoutError:
                pass
        # Whatever is still in flight is cut: each attempt ends now as RelayShutdown.
        self._deliverer.abort("the relay stopped during the attempt")
        if self._probes:
            await asyncio.wait(set(self._probes), timeout=max(deadline - loop.time(), 1.0))
        if self.broken:
            return
        await self._circuit.settle(at_most=max(deadline - loop.time(), 1.0))
        try:
            async with asyncio.timeout(max(deadline - loop.time(), 2.0)):
                await self.outcomes.join()
        except TimeoutError:
            log.warning("relay_outcomes_unrecorded", rows=self.outcomes.qsize())


def lease_ending(held: dict[UUID, Claim], lease_seconds: float, now: float) -> list[UUID]:
    """Held rows claimed so long ago (``time.monotonic()`` is ``now``) that their lease may have run
    out, oldest first: ``held`` keeps the order rows were claimed in. Every other held row is under a
    live lease, which the claim skips anyway."""
    horizon = now - max(lease_seconds - LEASE_MARGIN, 0.0)
    ending = []
    for event_id, claim in held.items():
        if claim.claimed_at > horizon:
            break
        ending.append(event_id)
    return ending


def _spawn(coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
    return asyncio.create_task(coro, name=name)

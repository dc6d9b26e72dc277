"""This relay's part in the endpoint's circuit: open it when the endpoint fails as a whole (or hold
it as a Retry-After asks), close or reopen it from a probe's answer, and tell the claimer when a
change is on its way to the database (no claims until it lands).

The statements and the failure streak are ``relay.circuit``'s; this holds what one relay process
knows between them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from datetime import datetime
from typing import Any

import psycopg
import structlog

from relay import circuit
from relay.backoff import parse_retry_after
from relay.circuit import FailureStreak, is_endpoint_failure
from relay.claims import Claim
from relay.config import RelayConfig
from relay.database import RelayPool
from relay.delivery import Attempt
from relay.metrics import RelayMetrics
from relay.policy import AttemptResult, describe

log = structlog.get_logger("relay")


class EndpointCircuit:
    def __init__(
        self, config: RelayConfig, pool: RelayPool, metrics: RelayMetrics, wake: Callable[[], None]
    ) -> None:
        self.config = config
        self.metrics = metrics
        self._pool = pool
        self._wake = wake
        self._streak = FailureStreak(config.circuit_failures)
        self._opening = False
        self._hold_asked_until = 0.0
        self._side_tasks: set[asyncio.Task[None]] = set()
        # An open (or a Retry-After hold) on its way to the database: no claims until it lands.
        self._gate_change: asyncio.Task[None] | None = None

    async def ensure(self) -> None:
        try:
            async with self._pool.connection() as conn:
                await circuit.ensure(conn, self.config.endpoint)
        except psycopg.Error as exc:
            log.warning("relay_endpoint_check_failed", error=str(exc).strip())

    async def release_probe(self) -> None:
        """A probe this relay still holds goes back at once, not when its lease runs out."""
        try:
            async with self._pool.connection() as conn:
                await circuit.release_probe(conn, self.config.endpoint, self.config.relay_id)
        except psycopg.Error as exc:
            log.warning("relay_probe_release_failed", error=str(exc).strip())

    def closed_since(self, since: datetime) -> None:
        """The claim found the circuit closed since ``since``: failures before it do not count."""
        self._streak.circuit_closed_at(since)

    async def changed(self, at_most: float) -> None:
        """Wait (at most ``at_most`` seconds) for an open or a hold on its way to the database to land."""
        if self._gate_change is not None and not self._gate_change.done():
            await asyncio.wait({self._gate_change}, timeout=at_most)

    async def settle(self, at_most: float) -> None:
        """Wait (at most ``at_most`` seconds) for every change on its way to the database."""
        if self._side_tasks:
            await asyncio.wait(set(self._side_tasks), timeout=at_most)

    def observe(self, claim: Claim, attempt: Attempt) -> None:
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
                    conn,
                    cfg.endpoint,
                    hold=hold,
                    error=error,
                    extend=retry_after is not None,
                    on_node=cfg.on_node,
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

    async def probed(self, result: AttemptResult) -> None:
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
            closed = await circuit.close(conn, cfg.endpoint, cfg.relay_id, on_node=cfg.on_node)
        if closed is None:
            return
        if cfg.on_node and cfg.listen_url is not None:
            await self._wake_listeners(cfg.listen_url)
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
        self._wake()

    async def _wake_listeners(self, url: str) -> None:
        """On Citus the relays LISTEN on the coordinator, not on the worker that ran the close: the
        relays of every node are woken there (once per close; a relay that misses it polls)."""
        try:
            async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
                await conn.execute(circuit.WAKE_RELAYS)
        except psycopg.Error as exc:
            log.warning("relay_circuit_wake_failed", error=str(exc).strip())

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
        task = asyncio.create_task(coro, name=name)
        self._side_tasks.add(task)
        task.add_done_callback(self._side_tasks.discard)
        return task

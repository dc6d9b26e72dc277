"""The relay process: its resources and its loops, started together and stopped together.

Its loops share the service's shape (``service.background``) and run in one ``Background``: the
claimer (``relay.claimer``: claim due rows, deliver them concurrently, drain at the stop), the
writers that record every outcome in batches, two statements at a time (``relay.recording``), the
retention (``relay.retention``) and, unless polling only, the LISTEN loop that wakes the claimer
(``relay.wakeup``). The claimer is the one loop the stop waits for; the others serve it, so they go
on until its drain has returned and are then cancelled. A loop that fails stops the relay, which
then exits non-zero. The endpoint's circuit, as this relay sees it, is ``relay.endpoint_circuit``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses

import structlog
from opentelemetry.trace import TracerProvider

from relay.claimer import Claimer
from relay.clock import relay_skew
from relay.config import RelayConfig, redacted
from relay.database import RelayPool, relay_pool
from relay.delivery import Deliverer
from relay.endpoint_circuit import EndpointCircuit
from relay.metrics import RelayMetrics
from relay.probes import ProbeServer
from relay.recording import OutcomeWriter
from relay.retention import Pruning, Retention
from relay.signing import Signer
from relay.wakeup import OutboxListener
from service.background import Background, Loop
from service.db import citus
from service.db.pooler import PoolerRefusalError, pooler_refusal, transaction_pooling
from service.loop_lag import LoopLag
from service.trace_context import recording_tracer

log = structlog.get_logger("relay")

WRITERS = 2


class Relay:
    def __init__(
        self,
        config: RelayConfig,
        metrics: RelayMetrics | None = None,
        *,
        tracer_provider: TracerProvider | None = None,
    ) -> None:
        self.config = config
        self.metrics = metrics or RelayMetrics()
        # Where the delivery spans go (relay.delivery): None, the global provider, if one is installed.
        self._tracer_provider = tracer_provider
        self.probe_port: int | None = None
        self._pool: RelayPool
        self._circuit: EndpointCircuit
        self._claimer: Claimer

    async def run(self, stop: asyncio.Event) -> None:
        """Deliver until ``stop`` is set; then finish or hand back what is in flight and return."""
        cfg = self.config
        failures: list[BaseException] = []
        claimer_failed: list[BaseException] = []

        def failed(loop: Loop, error: BaseException) -> None:
            # A loop ends at the stop or, serving the claimer, by cancellation; an error is a bug.
            # Stop (and exit non-zero) rather than keep claiming rows whose outcomes nobody records.
            # The claimer's own error is raised as it is.
            if loop is self._claimer:
                claimer_failed.append(error)
                stop.set()
                return
            log.error("relay_helper_failed", task=loop.name, error=repr(error))
            failures.append(error)
            self._claimer.broken = True
            stop.set()

        listen_url = await self._session_url()
        # Closed in reverse order, each even if an earlier one fails: loops, leases, HTTP, pool.
        async with contextlib.AsyncExitStack() as resources:
            await self._open(resources)
            log.info(
                "relay_started",
                relay_id=cfg.relay_id,
                webhook_url=redacted(cfg.webhook_url),
                secrets=len(cfg.webhook_secrets),
                concurrency=cfg.concurrency,
                lease_seconds=cfg.lease_seconds,
                poll_only=listen_url is None,
                prepared_statements=cfg.prepared,
                probe_port=self.probe_port,
            )
            await self._claimer.release(uncount=0)  # leases an earlier process with this relay id left
            await self._circuit.ensure()
            helpers = self._helpers(listen_url)
            async with Background(
                [self._claimer, *helpers],
                stop,
                on_failure=failed,
                cancel_last=helpers,
                rounds=self.metrics.loop_rounds,
            ):
                await stop.wait()
        log.info("relay_stopped", relay_id=cfg.relay_id, unrecorded=len(self._claimer.held))
        if claimer_failed:
            raise claimer_failed[0]
        if failures:
            raise RuntimeError("a relay helper task failed") from failures[0]

    async def _session_url(self) -> str | None:
        """Where the relay LISTENs, None to poll only: ``RELAY_POLL_ONLY``, or a transaction pooler
        in front of the database and no ``LISTEN_DATABASE_URL``. Refuses (``PoolerRefusalError``) what
        cannot work: prepared statements, or LISTEN, through a transaction pooler."""
        cfg = self.config
        pooled = await transaction_pooling(cfg.database_url)
        refusal = pooler_refusal(transaction_pooled=pooled, prepared=cfg.prepared)
        listen_pooled = (
            refusal is None
            and not cfg.poll_only
            and cfg.listen_url is not None
            and await transaction_pooling(cfg.listen_url)
        )
        if listen_pooled:
            refusal = (
                "LISTEN_DATABASE_URL leads through a connection pooler in transaction mode, "
                "where LISTEN hears nothing: point it at Postgres itself or at a pooler in "
                "session mode, or set RELAY_POLL_ONLY=true"
            )
        if refusal is not None:
            log.error("relay_start_refused", reason=refusal)
            raise PoolerRefusalError(refusal)
        if cfg.poll_only:
            return None
        if cfg.listen_url is not None:
            return cfg.listen_url
        return None if pooled else cfg.database_url

    async def _open(self, resources: contextlib.AsyncExitStack) -> None:
        cfg = self.config
        self._pool = relay_pool(cfg.database_url, prepared=cfg.prepared)
        await self._pool.open(wait=False)
        resources.push_async_callback(self._pool.close)
        self.metrics.pools.watch(self._pool)
        resources.callback(self.metrics.pools.forget, self._pool)
        cfg = self.config = await self._placed(cfg)
        if cfg.metrics_port:
            probes = ProbeServer(
                self.metrics,
                self._pool,
                host=cfg.metrics_host,
                port=cfg.metrics_port,
                ready_timeout=cfg.ready_timeout,
            )
            await probes.start()
            resources.push_async_callback(probes.close)
            self.probe_port = probes.port
        signer = Signer(cfg.webhook_secrets)
        deliverer = Deliverer(
            cfg.webhook_url,
            signer,
            timeout=cfg.timeout,
            concurrency=cfg.concurrency,
            lease_seconds=cfg.lease_seconds,
            skew=relay_skew(self.metrics.clock_offset),
            tracer=recording_tracer(self._tracer_provider),
            destination=cfg.endpoint,
        )
        resources.push_async_callback(deliverer.aclose)
        self._circuit = EndpointCircuit(cfg, self._pool, self.metrics, self.wake)
        self._claimer = Claimer(
            cfg, self.metrics, pool=self._pool, deliverer=deliverer, circuit=self._circuit
        )
        resources.push_async_callback(self._claimer.release, uncount=0)
        resources.push_async_callback(self._circuit.release_probe)

    async def _placed(self, cfg: RelayConfig) -> RelayConfig:
        """On Citus the relay works on the shards of the node it is connected to (a worker); it
        says how many it found there (none: it is connected to a coordinator without shards, and
        delivers nothing until shards are placed there)."""
        async with self._pool.connection() as conn:
            if not await citus.is_distributed(conn):
                return cfg
            cursor = await conn.execute("SELECT count(*) FROM local_shards('outbox')")
            row = await cursor.fetchone()
        shards = int(row[0]) if row else 0
        (log.info if shards else log.warning)(
            "relay_on_node",
            outbox_shards=shards,
            hint=None
            if shards
            else "point DATABASE_URL at a Citus worker (LISTEN_DATABASE_URL at the coordinator)",
        )
        return dataclasses.replace(cfg, on_node=True)

    def wake(self) -> None:
        self._claimer.wake()

    def _helpers(self, listen_url: str | None) -> list[Loop]:
        """The loops that serve the claimer: the writers, the retention, and (unless polling only)
        the LISTEN loop."""
        cfg = self.config
        helpers: list[Loop] = [
            OutcomeWriter(
                n,
                pool=self._pool,
                relay_id=cfg.relay_id,
                metrics=self.metrics,
                outcomes=self._claimer.outcomes,
                held=self._claimer.held,
                recorded=self.wake,
                on_node=cfg.on_node,
            )
            for n in range(WRITERS)
        ]
        helpers.append(LoopLag(self.metrics.loop_lag))
        retention = Retention(cfg.retention_days, cfg.dead_retention_days, cfg.relay_id)
        helpers.append(Pruning(self._pool, retention, self.metrics, on_node=cfg.on_node))
        if listen_url is not None:
            helpers.append(OutboxListener(listen_url, self.wake, prepared=cfg.prepared))
        return helpers

"""Prometheus metrics of one relay process, in its own registry (never created at import time).

The two histograms observed once per delivery are ``LoopHistogram``s: a bisect and two additions,
without the lock ``prometheus_client``'s own histogram takes (the relay observes them from its event
loop only); they read the same at a scrape. Counters move once per recorded batch.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Callable, Iterator, Sequence
from typing import cast

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.core import HistogramMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from relay.claims import Conn
from service.background import LoopRounds
from service.db.pool_metrics import PoolMetrics
from service.loop_lag import lag_histogram
from service.outbox_gauges import OutboxGauges

# How prometheus_client writes a bucket's bound (``le``); untyped there.
_bound_label = cast(Callable[[float], str], floatToGoString)

# Sampled on scrape only, and at most every STATS_MAX_AGE seconds, so that frequent scrapes of
# several relays do not keep the database busy.
STATS_MAX_AGE = 5.0


class RelayMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.outbox = OutboxGauges(r)
        self.loop_rounds = LoopRounds(r)
        self.attempts = Counter(
            "lineup_relay_delivery_attempts",
            "Delivery attempts by recorded outcome (delivered, retry, dead, lease_lost).",
            ["outcome"],
            registry=r,
        )
        self.attempt_seconds = LoopHistogram(
            "lineup_relay_delivery_attempt_seconds",
            "Duration of one POST to the Agent.",
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
            registry=r,
        )
        self.commit_to_delivery = LoopHistogram(
            "lineup_relay_commit_to_delivery_seconds",
            "From the outbox row's created_at to the Agent's 2xx.",
            buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 60, 600, 3600),
            registry=r,
        )
        self.in_flight = Gauge("lineup_relay_in_flight", "Rows this relay holds a lease on.", registry=r)
        self.clock_offset = Gauge(
            "lineup_relay_clock_offset_seconds",
            "How far this relay host's clock is ahead of the database's (negative: behind), at the last "
            "delivery; webhooks are stamped with the database's clock.",
            registry=r,
        )
        self.database_errors = Counter(
            "lineup_relay_database_errors", "Database operations that failed and were retried.", registry=r
        )
        self.pruned = Counter(
            "lineup_relay_pruned_rows", "Rows pruned by retention, by status.", ["status"], registry=r
        )
        self.circuit_transitions = Counter(
            "lineup_relay_circuit_transitions",
            "Changes of the endpoint's circuit this relay made: to open (failures, a Retry-After, a "
            "failed probe), half_open (it took the probe), closed (its probe was answered).",
            ["to"],
            registry=r,
        )
        self.database_reachable = Gauge(
            "lineup_database_reachable",
            "1 when this relay's last look at the database (at a scrape) succeeded, else 0.",
            registry=r,
        )
        self.loop_lag = lag_histogram(r)
        # The relay's connection pool, once open (relay.worker).
        self.pools = PoolMetrics()
        r.register(self.pools)
        self._stats_at = 0.0

    async def refresh_outbox(self, conn: Conn) -> None:
        if time.monotonic() - self._stats_at < STATS_MAX_AGE:
            return
        await self.outbox.sample(conn)
        self._stats_at = time.monotonic()


class LoopHistogram(Collector):
    """A histogram observed from one event loop (no lock), exposed as ``prometheus_client``'s
    ``Histogram`` exposes it: ``_bucket`` (cumulative, ``le`` up to ``+Inf``), ``_count``, ``_sum``."""

    def __init__(
        self, name: str, documentation: str, *, buckets: Sequence[float], registry: CollectorRegistry
    ) -> None:
        self.name = name
        self.documentation = documentation
        self._bounds = [float(b) for b in buckets]
        self._labels = [_bound_label(b) for b in self._bounds] + ["+Inf"]
        self._counts = [0] * (len(self._bounds) + 1)
        self._sum = 0.0
        registry.register(self)

    def observe(self, value: float) -> None:
        self._counts[bisect_left(self._bounds, value)] += 1
        self._sum += value

    def collect(self) -> Iterator[HistogramMetricFamily]:
        cumulative, total = [], 0
        for label, count in zip(self._labels, self._counts, strict=True):
            total += count
            cumulative.append((label, total))
        yield HistogramMetricFamily(self.name, self.documentation, buckets=cumulative, sum_value=self._sum)

    def describe(self) -> Iterator[HistogramMetricFamily]:
        yield HistogramMetricFamily(self.name, self.documentation)

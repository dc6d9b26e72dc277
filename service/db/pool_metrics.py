"""The connection pools' own figures as Prometheus metrics, read from psycopg_pool at each scrape.

A pool too small for the work it serves shows here first: checkouts that had to wait for a
connection (``lineup_db_pool_checkouts_waited_total``) and how long they waited altogether
(``lineup_db_pool_wait_seconds_total``). A tool call holds its connection for its statement and
that statement's commit, so a process needs about its call rate times that time in connections
(Little's law); past that, calls queue in the pool before they reach the database. Nothing more
is counted on a call that finds a connection idle: the figures are psycopg_pool's own statistics
(``get_stats()``, kept by the pool as it works), and the wait time ``RecoveringPool`` adds up on
the checkouts that did not find one (psycopg_pool's drops each wait's fraction of a millisecond),
turned into metrics only when the registry is read.

Each process watches its own pools: the service's (``lineup-service``) in the default registry, a
relay's (``lineup-relay``) in the relay's registry. Two pools of one name in a process (tests that
run two apps at once) are added together.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from psycopg_pool import AsyncConnectionPool

Watched = AsyncConnectionPool[Any]

# psycopg_pool's statistics (https://www.psycopg.org/psycopg3/docs/advanced/pool.html#pool-stats):
# (the metric, its help, psycopg_pool's key, the factor to the metric's unit).
GAUGES = (
    ("lineup_db_pool_connections", "Connections the pool holds, idle or lent.", "pool_size", 1.0),
    ("lineup_db_pool_idle_connections", "Connections idle, ready to lend.", "pool_available", 1.0),
    ("lineup_db_pool_max_connections", "The most connections the pool may hold.", "pool_max", 1.0),
    ("lineup_db_pool_waiting", "Checkouts waiting for a connection now.", "requests_waiting", 1.0),
)
COUNTERS = (
    ("lineup_db_pool_checkouts", "Connections lent by the pool.", "requests_num", 1.0),
    (
        "lineup_db_pool_checkouts_waited",
        "Checkouts that found no idle connection and waited for one.",
        "requests_queued",
        1.0,
    ),
    (
        "lineup_db_pool_wait_seconds",
        "Time checkouts spent waiting for a connection, all together.",
        "requests_wait_ms",
        0.001,
    ),
    (
        "lineup_db_pool_checkout_errors",
        "Checkouts that got no connection within the pool's timeout (6 s for the service).",
        "requests_errors",
        1.0,
    ),
    (
        "lineup_db_pool_connections_lost",
        "Pooled connections found broken and replaced (a restart, a failover, a terminated backend).",
        "connections_lost",
        1.0,
    ),
)


class PoolMetrics(Collector):
    """The figures of the pools it watches, labelled by pool name; empty while it watches none."""

    def __init__(self) -> None:
        self._pools: list[Watched] = []

    def watch(self, pool: Watched) -> None:
        if not any(watched is pool for watched in self._pools):
            self._pools.append(pool)

    def forget(self, pool: Watched) -> None:
        self._pools = [watched for watched in self._pools if watched is not pool]

    def _stats(self) -> dict[str, dict[str, float]]:
        by_name: dict[str, dict[str, float]] = {}
        for pool in self._pools:
            total = by_name.setdefault(pool.name, {})
            stats: dict[str, float] = dict(pool.get_stats())
            if isinstance(waited := getattr(pool, "wait_seconds", None), float):
                stats["requests_wait_ms"] = 1000.0 * waited  # service.db.pool's, to the microsecond
            for key, value in stats.items():
                total[key] = total.get(key, 0) + value
        return by_name

    def collect(self) -> Iterator[Metric]:
        stats = self._stats()
        if not stats:
            return
        for name, documentation, key, factor in GAUGES:
            gauge = GaugeMetricFamily(name, documentation, labels=["pool"])
            for pool, values in sorted(stats.items()):
                gauge.add_metric([pool], values.get(key, 0) * factor)
            yield gauge
        for name, documentation, key, factor in COUNTERS:
            counter = CounterMetricFamily(name, documentation, labels=["pool"])
            for pool, values in sorted(stats.items()):
                counter.add_metric([pool], values.get(key, 0) * factor)
            yield counter

    def describe(self) -> Iterator[Metric]:
        """The families by name, so the registry refuses a second collector of the same metrics."""
        for name, documentation, _, _ in GAUGES:
            yield GaugeMetricFamily(name, documentation, labels=["pool"])
        for name, documentation, _, _ in COUNTERS:
            yield CounterMetricFamily(name, documentation, labels=["pool"])

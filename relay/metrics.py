"""Prometheus metrics of one relay process, in its own registry (never created at import time)."""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from relay.claims import Conn
from service.db.gauges import OUTBOX_BY_STATUS

# Run on scrape only, and at most every STATS_MAX_AGE seconds, so that frequent scrapes of several
# relays do not keep scanning a large outbox.
STATS_MAX_AGE = 5.0


class RelayMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.outbox_rows = Gauge("lineup_outbox_rows", "Outbox rows by status.", ["status"], registry=r)
        self.oldest_pending_age = Gauge(
            "lineup_outbox_oldest_pending_age_seconds",
            "Age of the oldest pending outbox row (0 when none).",
            registry=r,
        )
        self.dead_rows = Gauge("lineup_outbox_dead_rows", "Outbox rows that are dead.", registry=r)
        self.attempts = Counter(
            "lineup_relay_delivery_attempts",
            "Delivery attempts by recorded outcome (delivered, retry, dead, lease_lost).",
            ["outcome"],
            registry=r,
        )
        self.attempt_seconds = Histogram(
            "lineup_relay_delivery_attempt_seconds",
            "Duration of one POST to the Agent.",
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
            registry=r,
        )
        self.commit_to_delivery = Histogram(
            "lineup_relay_commit_to_delivery_seconds",
            "From the outbox row's created_at to the Agent's 2xx.",
            buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 60, 600, 3600),
            registry=r,
        )
        self.in_flight = Gauge("lineup_relay_in_flight", "Rows this relay holds a lease on.", registry=r)
        self.database_errors = Counter(
            "lineup_relay_database_errors", "Database operations that failed and were retried.", registry=r
        )
        self.pruned = Counter("lineup_relay_pruned_rows", "Delivered rows pruned by retention.", registry=r)
        self.database_reachable = Gauge(
            "lineup_database_reachable",
            "1 when this relay's last look at the database (at a scrape) succeeded, else 0.",
            registry=r,
        )
        self._stats_at = 0.0

    async def refresh_outbox(self, conn: Conn) -> None:
        if time.monotonic() - self._stats_at < STATS_MAX_AGE:
            return
        cursor = await conn.execute(OUTBOX_BY_STATUS)
        seen = {status: (count, age) for status, count, age in await cursor.fetchall()}
        for status, (count, _) in seen.items():
            self.outbox_rows.labels(status).set(count)
        self.oldest_pending_age.set(seen.get("pending", (0, 0.0))[1])
        self.dead_rows.set(seen.get("dead", (0, 0.0))[0])
        self._stats_at = time.monotonic()

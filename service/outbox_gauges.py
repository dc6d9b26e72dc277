"""The outbox and delivery gauges that the service and every relay export, from one sample.

Each process has its own registry (the service the default one, a relay its own), so the gauges
are made per registry; the queries are ``service.db.gauges``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, Gauge
from psycopg import AsyncConnection
from psycopg.rows import tuple_row

from service.db import gauges


@dataclass(frozen=True, slots=True)
class Backlog:
    pending: int
    dead: int
    oldest_pending_age_seconds: float


class OutboxGauges:
    def __init__(self, registry: CollectorRegistry = REGISTRY) -> None:
        r = registry
        self.rows = Gauge(
            "lineup_outbox_rows",
            "Outbox rows by status, pending and dead (sampled; delivered ones are counted by "
            "lineup_relay_delivery_attempts_total).",
            ["status"],
            registry=r,
        )
        self.oldest_pending_age = Gauge(
            "lineup_outbox_oldest_pending_age_seconds",
            "Age of the oldest pending outbox row (0 when none; sampled).",
            registry=r,
        )
        self.dead_rows = Gauge("lineup_outbox_dead_rows", "Outbox rows that are dead (sampled).", registry=r)
        self.paused = Gauge(
            "lineup_delivery_paused",
            "1 while an operator has paused delivery (sampled).",
            ["endpoint"],
            registry=r,
        )
        self.paused_seconds = Gauge(
            "lineup_delivery_paused_seconds",
            "How long delivery has been paused (0 when not; sampled).",
            ["endpoint"],
            registry=r,
        )
        self.circuit_open = Gauge(
            "lineup_delivery_circuit_open",
            "1 while the endpoint's circuit is open or half open: only probes are sent (sampled).",
            ["endpoint"],
            registry=r,
        )

    async def sample(self, conn: AsyncConnection[Any]) -> Backlog:
        """Two statements, each costing the backlog and the endpoints, never the history."""
        async with conn.cursor(row_factory=tuple_row) as cursor:
            await cursor.execute(gauges.OUTBOX_BACKLOG)
            found = await cursor.fetchone()
            await cursor.execute(gauges.DELIVERY_STATE)
            endpoints = await cursor.fetchall()
        assert found is not None
        backlog = Backlog(int(found[0]), int(found[1]), float(found[2]))
        self.rows.labels("pending").set(backlog.pending)
        self.rows.labels("dead").set(backlog.dead)
        self.dead_rows.set(backlog.dead)
        self.oldest_pending_age.set(backlog.oldest_pending_age_seconds)
        for endpoint, paused, paused_seconds, _circuit, circuit_open in endpoints:
            self.paused.labels(endpoint).set(int(paused))
            self.paused_seconds.labels(endpoint).set(paused_seconds)
            self.circuit_open.labels(endpoint).set(int(circuit_open))
        return backlog

"""The outbox's depth over the last hour, sampled by serve's maintenance loop for the console."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from prometheus_client import REGISTRY

from service.db.pool import open_pool
from service.metrics import DATABASE_REACHABLE
from service.outbox_history import OutboxHistory
from service.use_cases.maintenance import sample_gauges
from tests.integration.test_ops_api import add_outbox_row


async def test_a_sample_keeps_the_outbox_depth_and_marks_the_database_reachable(
    db: Any, database_url: str
) -> None:
    add_outbox_row(db, "c", 1, "pending", age_seconds=30)
    add_outbox_row(db, "c", 2, "pending")
    add_outbox_row(db, "d", 1, "dead", attempts=1)
    history = OutboxHistory()
    DATABASE_REACHABLE.set(0)  # other tests' apps set it too: this sample must be what sets it
    pool = await open_pool(database_url, size=1)
    try:
        await sample_gauges(pool, history)
    finally:
        await pool.close()
    [sample] = history.samples()
    assert (sample["pending"], sample["dead"]) == (2, 1)
    assert 29 <= sample["oldest_pending_age_seconds"] < 60
    assert REGISTRY.get_sample_value("lineup_database_reachable") == 1.0


def test_samples_older_than_an_hour_are_dropped() -> None:
    history = OutboxHistory()
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for minute in range(0, 90, 15):
        history.add(minute, 0, 0.0, at=start + timedelta(minutes=minute))
    assert [s["pending"] for s in history.samples()] == [15, 30, 45, 60, 75]
    assert history.samples()[0]["at"] == "2026-01-01T00:15:00.000000Z"

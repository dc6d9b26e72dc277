"""The service process's own figures in /metrics: its connection pool (service.db.pool_metrics) —
checkouts, and those that waited for a connection and for how long, what says a replica's
DB_POOL_SIZE is too small — and its event loop's lag (service.loop_lag)."""

from __future__ import annotations

import asyncio
from typing import Any

from litestar.testing import AsyncTestClient
from prometheus_client.parser import text_string_to_metric_families

from harness.calls import start_body
from service.app import create_app
from service.manifests import Registry
from service.metrics import POOLS
from tests.conftest import AGENT, OPERATOR, make_settings
from tests.support.waiting import until

CALLS = 12


def pool_samples(text: str, pool: str) -> dict[str, float]:
    """Every ``lineup_db_pool_*`` sample of one pool in a /metrics text, by sample name."""
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        if family.name.startswith("lineup_db_pool_")
        for sample in family.samples
        if sample.labels.get("pool") == pool and not sample.name.endswith("_created")
    }


async def around_calls_at_once(
    client: AsyncTestClient[Any], prefix: str
) -> tuple[dict[str, float], dict[str, float]]:
    """The service pool's samples before and after CALLS starts sent at once (each accepted)."""

    async def samples() -> dict[str, float]:
        return pool_samples((await client.get("/metrics", headers=OPERATOR)).text, "lineup-service")

    before = await samples()
    answers = await asyncio.gather(
        *(
            client.post("/v1/tool-calls", json=start_body(f"{prefix}-{n}", 600), headers=AGENT)
            for n in range(CALLS)
        )
    )
    assert [answer.status_code for answer in answers] == [202] * CALLS
    return before, await samples()


async def test_calls_that_wait_for_a_connection_show_as_waited_checkouts_and_wait_time(
    database_url: str, registry: Registry
) -> None:
    app = create_app(make_settings(database_url, db_pool_size=1), registry, sweeper=False)
    async with AsyncTestClient(app=app) as client:
        before, after = await around_calls_at_once(client, "conv-pool")
    assert after["lineup_db_pool_max_connections"] == 1
    assert after["lineup_db_pool_connections"] == 1
    assert after["lineup_db_pool_waiting"] == 0
    # One connection for twelve calls at once: every call took a checkout, and those that found it
    # lent waited for it — each at least the rest of a statement and its commit.
    assert after["lineup_db_pool_checkouts_total"] - before["lineup_db_pool_checkouts_total"] >= CALLS
    waited = after["lineup_db_pool_checkouts_waited_total"] - before["lineup_db_pool_checkouts_waited_total"]
    assert waited >= 1
    assert after["lineup_db_pool_wait_seconds_total"] > before["lineup_db_pool_wait_seconds_total"]
    assert after["lineup_db_pool_checkout_errors_total"] == 0


async def test_a_pool_large_enough_for_the_calls_lends_without_waiting(
    database_url: str, registry: Registry
) -> None:
    roomy = CALLS + 8  # room for the calls and for what the background loops hold meanwhile
    app = create_app(make_settings(database_url, db_pool_size=roomy), registry, sweeper=False)
    async with AsyncTestClient(app=app) as client:
        # Every connection opened first (the pool grows on demand), then the calls.
        pool = app.state.runtime.pool
        await pool.resize(roomy, roomy)
        await until(lambda: pool.get_stats()["pool_available"] >= CALLS + 4)
        before, after = await around_calls_at_once(client, "conv-roomy")
    assert after["lineup_db_pool_checkouts_total"] - before["lineup_db_pool_checkouts_total"] >= CALLS
    assert after["lineup_db_pool_checkouts_waited_total"] == before["lineup_db_pool_checkouts_waited_total"]


async def test_a_closed_service_pool_leaves_the_metrics(database_url: str, registry: Registry) -> None:
    app = create_app(make_settings(database_url), registry, sweeper=False)
    async with AsyncTestClient(app=app) as client:
        pool: Any = app.state.runtime.pool
        assert any(watched is pool for watched in POOLS._pools)
        assert (await client.get("/metrics", headers=OPERATOR)).status_code == 200
    assert not any(watched is pool for watched in POOLS._pools)


async def test_the_service_reports_how_late_its_event_loop_runs(
    database_url: str, registry: Registry
) -> None:
    app = create_app(make_settings(database_url), registry, sweeper=False)
    async with AsyncTestClient(app=app) as client:
        lag = app.state.loop_lag
        await until(lambda: lag.rounds >= 2)
        text = (await client.get("/metrics", headers=OPERATOR)).text
    counts = [
        sample.value
        for family in text_string_to_metric_families(text)
        if family.name == "lineup_event_loop_lag_seconds"
        for sample in family.samples
        if sample.name == "lineup_event_loop_lag_seconds_count"
    ]
    assert counts and counts[0] >= 2

"""Housekeeping prunes what nobody needs any more, and nothing else."""

from __future__ import annotations

from typing import Any

from litestar.testing import AsyncTestClient

from harness.calls import interrupt_body, start_body
from service.db.pool import open_pool
from service.use_cases.maintenance import prune_projections, sample_gauges
from tests.conftest import AGENT, HOST


async def test_old_projection_events_and_closed_instances_capabilities_are_pruned(
    client: AsyncTestClient[Any], db: Any, database_url: str
) -> None:
    closed = (await client.post("/v1/tool-calls", json=start_body("c1"), headers=AGENT)).json()
    await client.post(f"/v1/host/instances/{closed['instance_id']}/capability", headers=HOST)
    await client.post("/v1/tool-calls", json=interrupt_body("c1"), headers=AGENT)
    still_open = (await client.post("/v1/tool-calls", json=start_body("c2"), headers=AGENT)).json()
    await client.post(f"/v1/host/instances/{still_open['instance_id']}/capability", headers=HOST)
    db.execute("UPDATE capabilities SET created_at = now() - interval '2 days'")
    db.execute(
        "UPDATE projection_events SET created_at = now() - interval '2 days' WHERE conversation_id = 'c1'"
    )
    before = db.execute(
        "SELECT count(*) AS n FROM projection_events WHERE conversation_id = 'c2'"
    ).fetchone()["n"]

    pool = await open_pool(database_url, size=2)
    try:
        assert await prune_projections(pool) > 0
        await sample_gauges(pool)
    finally:
        await pool.close()

    assert (
        db.execute("SELECT count(*) AS n FROM projection_events WHERE conversation_id = 'c1'").fetchone()["n"]
        == 0
    )
    assert (
        db.execute("SELECT count(*) AS n FROM projection_events WHERE conversation_id = 'c2'").fetchone()["n"]
        == before
    )
    remaining = db.execute("SELECT instance_id::text AS id FROM capabilities").fetchall()
    assert [r["id"] for r in remaining] == [still_open["instance_id"]]

"""Dimming, locking and reloading are recorded and never interrupt."""

from __future__ import annotations

from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from harness.calls import start_body
from tests.conftest import AGENT, HOST

Client = AsyncTestClient[Any]


async def test_every_surface_event_is_recorded_and_the_period_keeps_focusing(client: Client, db: Any) -> None:
    started = (await client.post("/v1/tool-calls", json=start_body("conv-1"), headers=AGENT)).json()
    for event in ("dimmed", "undimmed", "locked", "unlocked", "reloaded"):
        response = await client.post(
            f"/v1/host/instances/{started['instance_id']}/surface-events", json={"event": event}, headers=HOST
        )
        assert response.status_code == 200
        assert response.json() == {"interrupted": False}
    operation = db.execute("SELECT state FROM operations").fetchone()
    assert operation["state"] == "focusing"
    events = [
        r["event"]
        for r in db.execute("SELECT event FROM surface_events ORDER BY surface_event_id").fetchall()
    ]
    assert events == ["dimmed", "undimmed", "locked", "unlocked", "reloaded"]
    assert db.execute("SELECT count(*) AS n FROM outbox").fetchone()["n"] == 0


@pytest.mark.parametrize("event", ["left", "closed", "DIMMED", "", None])
async def test_any_other_event_is_422(client: Client, db: Any, event: Any) -> None:
    started = (await client.post("/v1/tool-calls", json=start_body("conv-1"), headers=AGENT)).json()
    response = await client.post(
        f"/v1/host/instances/{started['instance_id']}/surface-events", json={"event": event}, headers=HOST
    )
    assert response.status_code == 422
    assert db.execute("SELECT count(*) AS n FROM surface_events").fetchone()["n"] == 0


async def test_surface_event_for_an_unknown_instance_is_404(client: Client) -> None:
    response = await client.post(
        "/v1/host/instances/00000000-0000-0000-0000-000000000000/surface-events",
        json={"event": "dimmed"},
        headers=HOST,
    )
    assert response.status_code == 404
    assert response.json()["error"] == "unknown_instance"

"""A second timed app fits without touching the engine: the test-only kettle app
(tests/fixtures/kettle_app/: its manifest, its decisions in SQL, its registration) has an operation
with its own deadline, its own interrupt and its own leave rule — it boils on when the person looks
away, where Pomodoro is interrupted. It runs through REST and MCP, decides races once, is settled
by the sweeper, replays byte for byte and is delivered by the relay."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from harness.calls import expire, start_body
from harness.mcp import ModernWire
from harness.receiver import Receiver, new_secret
from service.app import create_app
from service.db import code
from service.manifests import Registry
from service.settings import Settings
from tests.conftest import AGENT, AGENT_TOKEN, HOST, registry_with
from tests.support.mcp_apps import APP_MIME_TYPE, HEADERS, UI
from tests.support.outbox import outbox_rows, relay_config, running_relay, wait_until

KETTLE = Path(__file__).resolve().parents[1] / "fixtures" / "kettle_app"
Client = AsyncTestClient[Any]


@pytest.fixture
def kettle_registry(db: Any) -> Registry:
    db.execute((KETTLE / "decisions.sql").read_text())
    code.declare_tools(db, code.declared_tools([KETTLE]), only_these=False)
    return registry_with(KETTLE)


@pytest.fixture
async def kettle(settings: Settings, kettle_registry: Registry) -> AsyncIterator[Client]:
    """The service with the kettle app; no sweeper (the tests that need it start their own)."""
    async with AsyncTestClient(app=create_app(settings, kettle_registry, sweeper=False)) as client:
        yield client


def boil(conversation_id: str, seconds: int = 60, tool_call_id: str | None = None) -> dict[str, Any]:
    return {
        "tool_call_id": tool_call_id or f"boil-{uuid.uuid4()}",
        "conversation_id": conversation_id,
        "tool": "kettle.boil",
        "arguments": {"seconds": seconds, "tea": "green"},
    }


def stop(conversation_id: str) -> dict[str, Any]:
    return {
        "tool_call_id": f"stop-{uuid.uuid4()}",
        "conversation_id": conversation_id,
        "tool": "kettle.stop",
        "arguments": {},
    }


def results(db: Any, tool_call_id: str) -> list[dict[str, Any]]:
    """The outbox rows of one call (its result, queued by whoever ended the operation)."""
    return [row for row in outbox_rows(db).values() if row["tool_call_id"] == tool_call_id]


async def test_rest_boils_replays_refuses_a_second_and_stops_with_one_result(kettle: Client, db: Any) -> None:
    body = boil("conv-kettle")
    first = await kettle.post("/v1/tool-calls", json=body, headers=AGENT)
    again = await kettle.post("/v1/tool-calls", json=body, headers=AGENT)
    assert first.status_code == again.status_code == 202
    assert again.content == first.content
    operation = first.json()["operation"]
    assert (operation["state"], operation["duration_seconds"], operation["activity"]) == (
        "focusing",
        60,
        "green",
    )
    second = await kettle.post("/v1/tool-calls", json=boil("conv-kettle"), headers=AGENT)
    assert (second.status_code, second.json()["error"]) == (409, "kettle_already_on")

    stopped = await kettle.post("/v1/tool-calls", json=stop("conv-kettle"), headers=AGENT)
    assert stopped.json() == {
        "tool_call_id": stopped.json()["tool_call_id"],
        "status": "stopped",
        "operation_id": operation["operation_id"],
    }
    idle = await kettle.post("/v1/tool-calls", json=stop("conv-kettle"), headers=AGENT)
    assert (idle.status_code, idle.json()["status"]) == (200, "not_boiling")
    (result,) = results(db, body["tool_call_id"])
    assert (result["payload"]["result"]["state"], result["payload"]["result"]["reason"]) == (
        "interrupted",
        "agent_interrupt",
    )
    replayed = await kettle.post("/v1/tool-calls", json=body, headers=AGENT)
    assert replayed.content == first.content
    workspace = (await kettle.get("/v1/host/conversations/conv-kettle/workspace", headers=HOST)).json()
    assert (workspace["foreground"], workspace["focusing_operation"]) == ("interact", None)


async def test_mcp_boils_and_stops_with_the_same_record_as_rest(kettle: Client) -> None:
    wire = ModernWire(kettle, "/mcp")
    wire.http.headers["Authorization"] = f"Bearer {AGENT_TOKEN}"
    tools = {tool["name"]: tool for tool in (await wire.post("tools/list", {})).json()["result"]["tools"]}
    assert tools["kettle_stop"]["annotations"]["destructiveHint"] is True

    async def call(name: str, arguments: dict[str, Any], tool_call_id: str) -> dict[str, Any]:
        meta = {"io.lineup/conversation_id": "conv-mcp-kettle", "io.lineup/tool_call_id": tool_call_id}
        answer = await wire.post("tools/call", {"name": name, "arguments": arguments, "_meta": meta})
        result: dict[str, Any] = answer.json()["result"]
        return result

    body = boil("conv-mcp-kettle", seconds=30)
    on = await call("kettle.boil", body["arguments"], body["tool_call_id"])
    # An operation a client declared tasks for: the task is the kettle's operation.
    assert (on["resultType"], on["status"]) == ("task", "working")
    replayed = await kettle.post("/v1/tool-calls", json=body, headers=AGENT)
    assert replayed.status_code == 202
    assert replayed.json()["operation"]["operation_id"] == on["taskId"]
    refused = await call("kettle.boil", body["arguments"], f"boil-{uuid.uuid4()}")
    assert (refused["isError"], refused["structuredContent"]["error"]) == (True, "kettle_already_on")
    off = await call("kettle.stop", {}, f"stop-{uuid.uuid4()}")
    assert off["structuredContent"]["status"] == "stopped"
    assert off["content"][0]["text"].startswith("The kettle is off.")
    task = (await wire.post("tasks/get", {"taskId": on["taskId"]})).json()["result"]
    assert (task["status"], task["statusMessage"]) == ("completed", "interrupted (agent_interrupt)")
    assert task["result"]["structuredContent"]["state"] == "interrupted"
    assert task["result"]["structuredContent"]["activity"] == "green"


async def test_leaving_the_kettle_keeps_it_boiling_where_leaving_pomodoro_interrupts_it(
    kettle: Client, db: Any
) -> None:
    on = (await kettle.post("/v1/tool-calls", json=boil("conv-leave-kettle"), headers=AGENT)).json()
    focus = (
        await kettle.post("/v1/tool-calls", json=start_body("conv-leave-pomodoro"), headers=AGENT)
    ).json()
    for conversation_id in ("conv-leave-kettle", "conv-leave-pomodoro"):
        left = await kettle.post(
            f"/v1/host/conversations/{conversation_id}/workspace/foreground",
            json={"target": "interact"},
            headers=HOST,
        )
        assert left.status_code == 200, left.text
    states = {row["tool"]: row["state"] for row in db.execute("SELECT tool, state FROM operations")}
    assert states == {"kettle.boil": "focusing", "pomodoro.start": "interrupted"}
    workspace = (await kettle.get("/v1/host/conversations/conv-leave-kettle/workspace", headers=HOST)).json()
    assert workspace["foreground"] == "interact"
    assert workspace["focusing_operation"]["operation_id"] == on["operation"]["operation_id"]
    assert results(db, on["tool_call_id"]) == []
    assert len(results(db, focus["tool_call_id"])) == 1
    # Only its Tool opens a kettle: the person cannot bring one to the foreground.
    refused = await kettle.post(
        "/v1/host/conversations/conv-other/workspace/foreground",
        json={"target": {"app_scope": "kettle"}},
        headers=HOST,
    )
    assert (refused.status_code, refused.json()["error"]) == (409, "app_not_resumable")
    assert "Kettle opens only through the kettle.boil tool" in refused.json()["message"]


async def test_concurrent_boils_and_stops_decide_once(kettle: Client, db: Any) -> None:
    boils = await asyncio.gather(
        *(kettle.post("/v1/tool-calls", json=boil("conv-race"), headers=AGENT) for _ in range(6))
    )
    assert sorted(answer.status_code for answer in boils) == [202] + [409] * 5
    stops = await asyncio.gather(
        *(kettle.post("/v1/tool-calls", json=stop("conv-race"), headers=AGENT) for _ in range(6))
    )
    assert sorted(answer.json()["status"] for answer in stops) == ["not_boiling"] * 5 + ["stopped"]
    (accepted,) = [answer.json() for answer in boils if answer.status_code == 202]
    assert len(results(db, accepted["tool_call_id"])) == 1


async def test_the_sweeper_settles_it_at_its_deadline_and_the_relay_delivers_the_result(
    settings: Settings, kettle_registry: Registry, db: Any, database_url: str
) -> None:
    secret = new_secret()
    async with AsyncTestClient(app=create_app(settings, kettle_registry, sweeper=True)) as swept:
        body = boil("conv-swept", seconds=1)
        accepted = await swept.post("/v1/tool-calls", json=body, headers=AGENT)
        assert accepted.status_code == 202

        async def completed() -> dict[str, Any]:
            for _ in range(200):
                row = db.execute("SELECT state, reason, lateness_ms FROM operations").fetchone()
                if row["state"] != "focusing":
                    return dict(row)
                await asyncio.sleep(0.05)
            raise TimeoutError("the sweeper did not settle the kettle")

        settled = await completed()
        assert (settled["state"], settled["reason"]) == ("completed", "deadline_reached")
        assert settled["lateness_ms"] >= 0
        replayed = await swept.post("/v1/tool-calls", json=body, headers=AGENT)
        assert replayed.content == accepted.content
    (queued,) = results(db, body["tool_call_id"])
    with Receiver([secret]) as agent, running_relay(relay_config(database_url, agent.url, [secret])):
        (delivery,) = await asyncio.to_thread(agent.wait_for_accepted, {str(queued["event_id"])})
        await asyncio.to_thread(
            wait_until, lambda: outbox_rows(db)[str(queued["event_id"])]["status"] == "delivered"
        )
    payload = json.loads(delivery.body)
    assert payload["tool_call_id"] == body["tool_call_id"]
    assert (payload["result"]["state"], payload["result"]["activity"]) == ("completed", "green")


async def test_a_kettle_past_its_deadline_is_settled_by_the_next_call_in_its_conversation(
    kettle: Client, db: Any
) -> None:
    on = (await kettle.post("/v1/tool-calls", json=boil("conv-overdue"), headers=AGENT)).json()
    expire(db, on["operation"]["operation_id"])
    again = await kettle.post("/v1/tool-calls", json=boil("conv-overdue"), headers=AGENT)
    assert again.status_code == 202
    states = [row["state"] for row in db.execute("SELECT state FROM operations ORDER BY started_at")]
    assert states == ["completed", "focusing"]
    assert len(results(db, on["tool_call_id"])) == 1


async def test_its_page_is_served_from_its_own_folder_sandboxed_like_a_shipped_one(kettle: Client) -> None:
    page = await kettle.get("/apps/kettle/")
    assert page.status_code == 200
    assert page.content == (KETTLE / "surface" / "index.html").read_bytes()
    assert "sandbox allow-scripts" in page.headers["content-security-policy"]
    style = await kettle.get("/apps/kettle/kettle.css")
    assert (style.status_code, style.content) == (200, (KETTLE / "surface" / "kettle.css").read_bytes())
    assert style.headers["content-type"] == "text/css; charset=utf-8"
    for elsewhere in ("/apps/kettle/decisions.sql", "/apps/kettle/manifest.json", "/apps/kettle/nothing.js"):
        assert (await kettle.get(elsewhere)).status_code == 404, elsewhere


async def test_its_view_is_an_mcp_app_of_its_own(kettle: Client) -> None:
    """The kettle declares its page an MCP App (its manifest's surface.mcp_app): the MCP face serves
    it as ui://kettle/kettle to a host that renders MCP Apps, names it on kettle.boil and gives it
    View tools of its own."""
    headers = {**HEADERS, "Authorization": f"Bearer {AGENT_TOKEN}"}
    ids = iter(range(1, 100))

    async def request(method: str, params: dict[str, Any]) -> dict[str, Any]:
        answer = await kettle.post(
            "/mcp",
            json={"jsonrpc": "2.0", "id": next(ids), "method": method, "params": params},
            headers=headers,
        )
        assert answer.status_code == 200, answer.text
        if "mcp-session-id" in answer.headers:
            headers.update(
                {"Mcp-Session-Id": answer.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-11-25"}
            )
        result: dict[str, Any] = answer.json()["result"]
        return result

    await request(
        "initialize",
        {
            "protocolVersion": "2025-11-25",
            "capabilities": {"extensions": {UI: {"mimeTypes": [APP_MIME_TYPE]}}},
            "clientInfo": {"name": "apps-host", "version": "0"},
        },
    )
    await kettle.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    uri = "ui://kettle/kettle"
    listed = {resource["uri"] for resource in (await request("resources/list", {}))["resources"]}
    assert {uri, "ui://pomodoro/timer"} <= listed
    (content,) = (await request("resources/read", {"uri": uri}))["contents"]
    assert (content["uri"], content["mimeType"]) == (uri, APP_MIME_TYPE)
    assert 'data-testid="kettle"' in content["text"]
    assert (KETTLE / "surface" / "kettle.css").read_text().strip() in content["text"]
    assert "kettle_app_read" in content["text"]
    tools = {tool["name"]: tool for tool in (await request("tools/list", {}))["tools"]}
    assert tools["kettle_boil"]["_meta"]["ui"]["resourceUri"] == uri
    assert "ui" not in tools["kettle_stop"].get("_meta", {})
    assert tools["kettle_app_read"]["_meta"]["ui"]["visibility"] == ["app"]

"""A test-only tea timer shaped like the Pomodoro (tests/fixtures/tea_timer_app/: the same argument
names and answer words), written on the Runtime's SQL API alone and touching nothing outside its
folder and this test: it runs beside the Pomodoro through REST (its answers told apart from the
Pomodoro's by Tool in the OpenAPI document) and MCP with tasks, decides races
once, is settled by the sweeper and by the next call after its deadline, answers the same after a
restart, leaves like the Pomodoro, and its results are delivered by the relay."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from litestar.testing import AsyncTestClient
from openapi_spec_validator import validate as validate_spec

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

TEA = Path(__file__).resolve().parents[1] / "fixtures" / "tea_timer_app"
Client = AsyncTestClient[Any]


@pytest.fixture
def tea_registry(db: Any) -> Registry:
    db.execute((TEA / "decisions.sql").read_text())
    code.declare_tools(db, code.declared_tools([TEA]), only_these=False)
    return registry_with(TEA)


@pytest.fixture
async def tea(settings: Settings, tea_registry: Registry) -> AsyncIterator[Client]:
    async with AsyncTestClient(app=create_app(settings, tea_registry, sweeper=False)) as client:
        yield client


def steep(conversation_id: str, seconds: int = 60, tool_call_id: str | None = None) -> dict[str, Any]:
    return {
        "tool_call_id": tool_call_id or f"tea-{uuid.uuid4()}",
        "conversation_id": conversation_id,
        "tool": "tea.start",
        "arguments": {"duration_seconds": seconds, "activity": "sencha"},
    }


def interrupt(conversation_id: str) -> dict[str, Any]:
    return {
        "tool_call_id": f"tea-off-{uuid.uuid4()}",
        "conversation_id": conversation_id,
        "tool": "tea.interrupt",
        "arguments": {},
    }


def results(db: Any, tool_call_id: str) -> list[dict[str, Any]]:
    return [row for row in outbox_rows(db).values() if row["tool_call_id"] == tool_call_id]


async def test_rest_answers_with_the_pomodoros_words_beside_a_running_pomodoro(tea: Client, db: Any) -> None:
    focus = await tea.post("/v1/tool-calls", json=start_body("conv-tea"), headers=AGENT)
    body = steep("conv-tea")
    first = await tea.post("/v1/tool-calls", json=body, headers=AGENT)
    assert (focus.status_code, first.status_code) == (202, 202)
    answer = first.json()
    assert (
        set(answer)
        == set(focus.json())
        == {"tool_call_id", "status", "operation", "instance_id", "sub_session_id"}
    )
    assert (answer["operation"]["activity"], answer["operation"]["duration_seconds"]) == ("sencha", 60)
    again = await tea.post("/v1/tool-calls", json=body, headers=AGENT)
    assert again.content == first.content
    second = await tea.post("/v1/tool-calls", json=steep("conv-tea"), headers=AGENT)
    assert (second.status_code, second.json()["error"]) == (409, "operation_already_focusing")
    assert second.json()["operation_id"] == answer["operation"]["operation_id"]

    off = await tea.post("/v1/tool-calls", json=interrupt("conv-tea"), headers=AGENT)
    assert off.json() == {
        "tool_call_id": off.json()["tool_call_id"],
        "status": "interrupted",
        "operation_id": answer["operation"]["operation_id"],
    }
    late = await tea.post("/v1/tool-calls", json=interrupt("conv-tea"), headers=AGENT)
    assert (late.json()["status"], late.json()["final_state"]) == ("operation_already_final", "interrupted")
    (result,) = results(db, body["tool_call_id"])
    assert (result["payload"]["result"]["state"], result["payload"]["result"]["reason"]) == (
        "interrupted",
        "agent_interrupt",
    )
    # The Pomodoro of the same conversation was not touched by the tea's interrupt.
    states = {row["tool"]: row["state"] for row in db.execute("SELECT tool, state FROM operations")}
    assert states == {"pomodoro.start": "focusing", "tea.start": "interrupted"}


async def test_mcp_runs_it_as_a_task(tea: Client) -> None:
    wire = ModernWire(tea, "/mcp")
    wire.http.headers["Authorization"] = f"Bearer {AGENT_TOKEN}"
    tools = {tool["name"] for tool in (await wire.post("tools/list", {})).json()["result"]["tools"]}
    # Listed under their provider-safe names; called below by the manifest's, which still answer.
    assert {"tea_start", "tea_interrupt", "pomodoro_start"} <= tools

    async def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        meta = {
            "io.lineup/conversation_id": "conv-mcp-tea",
            "io.lineup/tool_call_id": f"{name}-{uuid.uuid4()}",
        }
        answer = await wire.post("tools/call", {"name": name, "arguments": arguments, "_meta": meta})
        result: dict[str, Any] = answer.json()["result"]
        return result

    on = await call("tea.start", {"duration_seconds": 30, "activity": "sencha"})
    assert (on["resultType"], on["status"]) == ("task", "working")
    off = await call("tea.interrupt", {})
    assert off["structuredContent"]["status"] == "interrupted"
    task = (await wire.post("tasks/get", {"taskId": on["taskId"]})).json()["result"]
    assert (task["status"], task["statusMessage"]) == ("completed", "interrupted (agent_interrupt)")
    assert task["result"]["structuredContent"]["activity"] == "sencha"


async def test_concurrent_starts_and_interrupts_decide_once(tea: Client, db: Any) -> None:
    starts = await asyncio.gather(
        *(tea.post("/v1/tool-calls", json=steep("conv-tea-race"), headers=AGENT) for _ in range(6))
    )
    assert sorted(answer.status_code for answer in starts) == [202] + [409] * 5
    stops = await asyncio.gather(
        *(tea.post("/v1/tool-calls", json=interrupt("conv-tea-race"), headers=AGENT) for _ in range(6))
    )
    assert (
        sorted(answer.json()["status"] for answer in stops)
        == ["interrupted"] + ["operation_already_final"] * 5
    )
    (accepted,) = [answer.json() for answer in starts if answer.status_code == 202]
    assert len(results(db, accepted["tool_call_id"])) == 1


async def test_leaving_it_interrupts_it_as_leaving_the_pomodoro_does(tea: Client, db: Any) -> None:
    on = (await tea.post("/v1/tool-calls", json=steep("conv-tea-leave"), headers=AGENT)).json()
    left = await tea.post(
        "/v1/host/conversations/conv-tea-leave/workspace/foreground",
        json={"target": "interact"},
        headers=HOST,
    )
    assert left.status_code == 200, left.text
    row = db.execute("SELECT state, reason FROM operations WHERE tool = 'tea.start'").fetchone()
    assert (row["state"], row["reason"]) == ("interrupted", "user_left_workspace")
    assert len(results(db, on["tool_call_id"])) == 1


async def test_past_its_deadline_the_next_call_settles_it(tea: Client, db: Any) -> None:
    on = (await tea.post("/v1/tool-calls", json=steep("conv-tea-due"), headers=AGENT)).json()
    expire(db, on["operation"]["operation_id"])
    again = await tea.post("/v1/tool-calls", json=steep("conv-tea-due"), headers=AGENT)
    assert again.status_code == 202
    assert [row["state"] for row in db.execute("SELECT state FROM operations ORDER BY started_at")] == [
        "completed",
        "focusing",
    ]
    assert len(results(db, on["tool_call_id"])) == 1


async def test_after_a_restart_it_replays_and_settles_once(
    settings: Settings, tea_registry: Registry, db: Any
) -> None:
    body = steep("conv-tea-restart")
    async with AsyncTestClient(app=create_app(settings, tea_registry, sweeper=False)) as before:
        first = await before.post("/v1/tool-calls", json=body, headers=AGENT)
    async with AsyncTestClient(app=create_app(settings, tea_registry, sweeper=False)) as after:
        replayed = await after.post("/v1/tool-calls", json=body, headers=AGENT)
        off = await after.post("/v1/tool-calls", json=interrupt("conv-tea-restart"), headers=AGENT)
    assert replayed.content == first.content
    assert off.json()["status"] == "interrupted"
    assert len(results(db, body["tool_call_id"])) == 1


async def test_the_sweeper_settles_it_and_the_relay_delivers_the_result(
    settings: Settings, tea_registry: Registry, db: Any, database_url: str
) -> None:
    secret = new_secret()
    body = steep("conv-tea-swept", seconds=1)
    async with AsyncTestClient(app=create_app(settings, tea_registry, sweeper=True)) as swept:
        assert (await swept.post("/v1/tool-calls", json=body, headers=AGENT)).status_code == 202
        for _ in range(200):
            if db.execute("SELECT state FROM operations").fetchone()["state"] != "focusing":
                break
            await asyncio.sleep(0.05)
    row = db.execute("SELECT state, reason FROM operations").fetchone()
    assert (row["state"], row["reason"]) == ("completed", "deadline_reached")
    (queued,) = results(db, body["tool_call_id"])
    with Receiver([secret]) as agent, running_relay(relay_config(database_url, agent.url, [secret])):
        (delivery,) = await asyncio.to_thread(agent.wait_for_accepted, {str(queued["event_id"])})
        await asyncio.to_thread(
            wait_until, lambda: outbox_rows(db)[str(queued["event_id"])]["status"] == "delivered"
        )
    payload = json.loads(delivery.body)
    assert (payload["tool"], payload["result"]["state"], payload["result"]["activity"]) == (
        "tea.start",
        "completed",
        "sencha",
    )


def _valid(document: dict[str, Any], ref: str, body: Any) -> bool:
    return jsonschema.Draft202012Validator({**document, "$ref": ref}).is_valid(body)


async def test_the_openapi_document_tells_its_answers_from_the_pomodoros_by_tool(tea: Client) -> None:
    """Its answers have the Pomodoro's words and shapes: the published document still holds and
    selects each answer's schema by the Tool called."""
    document = (await tea.get("/schema/openapi.json")).json()
    validate_spec(document)
    operation = document["paths"]["/v1/tool-calls"]["post"]
    by_tool = operation["x-answers-by-tool"]
    assert {"tea.start", "tea.interrupt", "pomodoro.start", "pomodoro.interrupt"} <= set(by_tool)
    started = (await tea.post("/v1/tool-calls", json=steep("conv-tea-doc"), headers=AGENT)).json()
    stopped = (await tea.post("/v1/tool-calls", json=interrupt("conv-tea-doc"), headers=AGENT)).json()
    idle = (await tea.post("/v1/tool-calls", json=interrupt("conv-tea-doc-idle"), headers=AGENT)).json()
    for tool, status, answer in (
        ("tea.start", "202", started),
        ("tea.interrupt", "200", stopped),
        ("tea.interrupt", "200", idle),
    ):
        assert by_tool[tool][status] != by_tool[tool.replace("tea.", "pomodoro.")][status]
        assert _valid(document, by_tool[tool][status], answer), (tool, answer)
        assert _valid(
            document,
            f"#/paths/~1v1~1tool-calls/post/responses/{status}/content/application~1json/schema",
            answer,
        )


async def test_its_view_is_an_mcp_app_beside_the_pomodoros(tea: Client) -> None:
    headers = {**HEADERS, "Authorization": f"Bearer {AGENT_TOKEN}"}
    ids = iter(range(1, 100))

    async def request(method: str, params: dict[str, Any]) -> dict[str, Any]:
        answer = await tea.post(
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
    await tea.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    listed = {resource["uri"] for resource in (await request("resources/list", {}))["resources"]}
    assert {"ui://tea/timer", "ui://pomodoro/timer"} <= listed
    (content,) = (await request("resources/read", {"uri": "ui://tea/timer"}))["contents"]
    assert 'data-testid="tea"' in content["text"] and "tea_app_read" in content["text"]
    tools = {tool["name"]: tool for tool in (await request("tools/list", {}))["tools"]}
    assert tools["tea_start"]["_meta"]["ui"]["resourceUri"] == "ui://tea/timer"
    assert tools["pomodoro_start"]["_meta"]["ui"]["resourceUri"] == "ui://pomodoro/timer"
    assert tools["tea_app_read"]["_meta"]["ui"]["visibility"] == ["app"]

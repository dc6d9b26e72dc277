"""Adding a Tool is one folder — its manifest, its decision function and its registration: the
test-only echo app (tests/fixtures/echo_app/) runs through REST and MCP, replays, and is refused
correctly, with nothing of it under service/."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from harness.mcp import ModernWire
from service.app import create_app
from service.settings import Settings
from tests.conftest import AGENT, AGENT_TOKEN, registry_with
from tests.support.echo_app import FOLDER, decision_sql

Client = AsyncTestClient[Any]


@pytest.fixture
async def echo_client(settings: Settings, db: Any) -> AsyncIterator[Client]:
    db.execute(decision_sql())
    registry = registry_with(FOLDER)
    assert registry.unregistered() == []
    async with AsyncTestClient(app=create_app(settings, registry, sweeper=False)) as client:
        yield client


def _body(word: str, tool_call_id: str | None = None) -> dict[str, Any]:
    return {
        "tool_call_id": tool_call_id or f"echo-{uuid.uuid4()}",
        "conversation_id": "conv-echo",
        "tool": "echo.say",
        "arguments": {"word": word},
    }


async def test_the_tool_is_listed_by_both_faces(echo_client: Client) -> None:
    listed = (await echo_client.get("/v1/tools", headers=AGENT)).json()["tools"]
    assert "echo.say" in [tool["name"] for tool in listed]
    wire = ModernWire(echo_client, "/mcp")
    wire.http.headers["Authorization"] = f"Bearer {AGENT_TOKEN}"
    tools = (await wire.post("tools/list", {})).json()["result"]["tools"]
    echo = next(tool for tool in tools if tool["name"] == "echo_say")
    assert echo["annotations"]["title"] == "Say it back"
    assert echo["annotations"]["readOnlyHint"] is True
    assert "execution" not in echo  # it opens nothing a client could await


async def test_rest_answers_replays_and_refuses(echo_client: Client) -> None:
    body = _body("hello")
    first = await echo_client.post("/v1/tool-calls", json=body, headers=AGENT)
    again = await echo_client.post("/v1/tool-calls", json=body, headers=AGENT)
    assert first.status_code == again.status_code == 200
    assert first.json() == {"tool_call_id": body["tool_call_id"], "status": "said", "word": "HELLO"}
    assert again.content == first.content
    forbidden = await echo_client.post("/v1/tool-calls", json=_body("never"), headers=AGENT)
    assert forbidden.status_code == 409
    assert forbidden.json()["error"] == "word_forbidden"
    reused = await echo_client.post(
        "/v1/tool-calls", json=_body("other", body["tool_call_id"]), headers=AGENT
    )
    assert (reused.status_code, reused.json()["error"]) == (409, "idempotency_key_reused")
    invalid = await echo_client.post("/v1/tool-calls", json=_body(""), headers=AGENT)
    assert (invalid.status_code, invalid.json()["error"]) == (422, "invalid_arguments")


async def test_mcp_answers_with_the_same_record_and_refuses_as_rest(echo_client: Client) -> None:
    wire = ModernWire(echo_client, "/mcp")
    wire.http.headers["Authorization"] = f"Bearer {AGENT_TOKEN}"
    body = _body("mcp")

    async def call(arguments: dict[str, Any], tool_call_id: str) -> dict[str, Any]:
        params = {
            "name": "echo.say",
            "arguments": arguments,
            "_meta": {"io.lineup/conversation_id": "conv-echo", "io.lineup/tool_call_id": tool_call_id},
        }
        answer = await wire.post("tools/call", params)
        result: dict[str, Any] = answer.json()["result"]
        return result

    said = await call({"word": "mcp"}, body["tool_call_id"])
    assert said["isError"] is False
    assert said["structuredContent"] == {
        "tool_call_id": body["tool_call_id"],
        "status": "said",
        "word": "MCP",
    }
    assert said["content"][0]["text"].startswith("Echo said MCP.")
    replayed = await echo_client.post("/v1/tool-calls", json=body, headers=AGENT)
    assert replayed.json() == said["structuredContent"]
    refused = await call({"word": "never"}, f"echo-{uuid.uuid4()}")
    assert refused["isError"] is True
    assert refused["structuredContent"]["error"] == "word_forbidden"
    assert refused["content"][0]["text"].startswith("echo.say was refused (word_forbidden)")

"""The test-only app of the MCP conformance suite's fixture tools (tests/fixtures/conformance_app/,
loaded only by rigs/mcp_conformance.py) answers as the suite's fixtures do, through the engine as
any app: checked here over REST and MCP, without the suite (the rig runs the suite itself)."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from litestar.testing import AsyncTestClient
from mcp_types.jsonrpc import HEADER_MISMATCH

from harness.mcp import ModernWire, bound
from service.app import create_app
from service.db import code
from service.manifests import Registry
from service.settings import Settings
from service.tool_names import listed_name
from tests.conftest import AGENT, AGENT_TOKEN, registry_with

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "conformance_app"
Client = AsyncTestClient[Any]


@pytest.fixture
def fixtures_registry(db: Any) -> Registry:
    db.execute((FIXTURES / "decisions.sql").read_text())
    code.declare_tools(db, code.declared_tools([FIXTURES]), only_these=False)
    return registry_with(FIXTURES)


@pytest.fixture
async def client(settings: Settings, fixtures_registry: Registry) -> AsyncIterator[Client]:
    async with AsyncTestClient(app=create_app(settings, fixtures_registry, sweeper=False)) as client:
        yield client


async def call(client: Client, conversation_id: str, tool: str, arguments: dict[str, Any]) -> Any:
    body = {
        "tool_call_id": f"call-{uuid.uuid4()}",
        "conversation_id": conversation_id,
        "tool": tool,
        "arguments": arguments,
    }
    return await client.post("/v1/tool-calls", json=body, headers=AGENT)


async def test_the_fixture_tools_answer_as_the_suites_fixtures_do(client: Client) -> None:
    cid = f"conv-{uuid.uuid4()}"
    greeted = await call(client, cid, "conformance.greet", {"name": "World"})
    assert (greeted.status_code, greeted.json()["greeting"]) == (200, "Hello, World!")
    said = await call(client, cid, "conformance.test-simple-text", {})
    assert said.json()["text"] == "This is a simple text response for testing."
    refused = await call(client, cid, "conformance.test-error-handling", {})
    assert refused.status_code == 409
    assert refused.json()["message"] == "This tool intentionally returns an error for testing"

    # slow_compute: at once for 0 seconds; otherwise an operation, and any number at once.
    instant = await call(client, cid, "conformance.slow-compute", {"seconds": 0, "label": "now"})
    assert (instant.status_code, instant.json()["status"]) == (200, "computed")
    long = [await call(client, cid, "conformance.slow-compute", {"seconds": 60}) for _ in range(2)]
    assert [answer.status_code for answer in long] == [202, 202]
    for answer in long:
        operation = await client.get(
            f"/v1/operations/{answer.json()['operation']['operation_id']}", headers=AGENT
        )
        assert (operation.json()["state"], operation.json()["tool"]) == (
            "focusing",
            "conformance.slow-compute",
        )

    # json_schema_2020_12_tool: its arguments held to its 2020-12 schema (anyOf phone or email).
    missing = await call(client, cid, "conformance.json-schema-2020-12-tool", {"name": "Ada"})
    assert (missing.status_code, missing.json()["error"]) == (422, "invalid_arguments")
    took = await call(
        client, cid, "conformance.json-schema-2020-12-tool", {"name": "Ada", "email": "ada@example.org"}
    )
    assert (took.status_code, took.json()["arguments"]["email"]) == (200, "ada@example.org")


# --- MCP: a Tool's own content (Registration.content), and SEP-2243's Mcp-Param-* headers ---------


def wire(client: Client) -> ModernWire:
    mcp = ModernWire(client, "/mcp")
    mcp.http.headers["Authorization"] = f"Bearer {AGENT_TOKEN}"
    return mcp


def mcp_call(
    tool: str, arguments: dict[str, Any], cid: str, tool_call_id: str | None = None
) -> dict[str, Any]:
    return {"name": listed_name(tool), "arguments": arguments, "_meta": bound(cid, tool_call_id)}


async def test_a_tools_own_content_is_the_results_content_and_its_answer_the_structured_one(
    client: Client,
) -> None:
    cid, call_id = f"conv-{uuid.uuid4()}", f"call-{uuid.uuid4()}"
    mcp = wire(client)
    first = await mcp.post(
        "tools/call", mcp_call("conformance.test-multiple-content-types", {}, cid, call_id)
    )
    again = await mcp.post(
        "tools/call", mcp_call("conformance.test-multiple-content-types", {}, cid, call_id)
    )
    result = first.json()["result"]
    assert result["content"] == [
        {"type": "text", "text": "Multiple content types test:"},
        {"type": "image", "data": result["structuredContent"]["image"]["data"], "mimeType": "image/png"},
        {
            "type": "resource",
            "resource": {
                "uri": "test://mixed-content-resource",
                "mimeType": "application/json",
                "text": '{"test":"data","value":123}',
            },
        },
    ]
    assert base64.b64decode(result["content"][1]["data"]).startswith(b"\x89PNG")
    assert result["isError"] is False and result["_meta"]["io.lineup/http_status"] == 200
    # The replay answers the same bytes; REST answers the structured answer as it is.
    assert again.content == first.content.replace(b'"id":1', b'"id":2')
    rest = await client.post(
        "/v1/tool-calls",
        json={
            "tool_call_id": call_id,
            "conversation_id": cid,
            "tool": "conformance.test-multiple-content-types",
            "arguments": {},
        },
        headers=AGENT,
    )
    assert rest.json() == result["structuredContent"]
    assert rest.json()["status"] == "mixed"


@pytest.mark.parametrize(
    ("tool", "kind", "mime_type"),
    [
        ("conformance.test-image-content", "image", "image/png"),
        ("conformance.test-audio-content", "audio", "audio/wav"),
    ],
)
async def test_image_and_audio_content(client: Client, tool: str, kind: str, mime_type: str) -> None:
    result = await wire(client).result("tools/call", mcp_call(tool, {}, f"conv-{uuid.uuid4()}"))
    [item] = result["content"]
    assert (item["type"], item["mimeType"]) == (kind, mime_type)
    assert item["data"] == result["structuredContent"][kind]["data"]


async def test_an_embedded_resource(client: Client) -> None:
    result = await wire(client).result(
        "tools/call", mcp_call("conformance.test-embedded-resource", {}, f"conv-{uuid.uuid4()}")
    )
    assert result["content"] == [
        {
            "type": "resource",
            "resource": {
                "uri": "test://embedded-resource",
                "mimeType": "text/plain",
                "text": "This is an embedded resource content.",
            },
        }
    ]


async def test_greet_answers_its_exact_text_and_a_refusal_keeps_the_sentence_and_the_json(
    client: Client,
) -> None:
    mcp, cid = wire(client), f"conv-{uuid.uuid4()}"
    greeted = await mcp.result("tools/call", mcp_call("conformance.greet", {"name": "sep-2243"}, cid))
    assert greeted["content"] == [{"type": "text", "text": "Hello, sep-2243!"}]
    assert greeted["structuredContent"]["greeting"] == "Hello, sep-2243!"
    refused = await mcp.result("tools/call", mcp_call("conformance.greet", {"name": ""}, cid))
    assert refused["isError"] is True
    [text] = refused["content"]
    sentence, body = text["text"].split("\n", 1)
    assert sentence.startswith("conformance.greet was refused (invalid_arguments)")
    assert json.loads(body) == refused["structuredContent"]


async def test_a_tool_without_content_of_its_own_answers_the_sentence_and_the_json(client: Client) -> None:
    result = await wire(client).result(
        "tools/call", mcp_call("conformance.test-simple-text", {}, f"conv-{uuid.uuid4()}")
    )
    [text] = result["content"]
    assert text["text"] == (
        "This is a simple text response for testing.\n"
        + msgspec.json.encode(result["structuredContent"]).decode()
    )


def routed(cid: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return mcp_call("conformance.test-custom-headers", arguments, cid)


async def test_mcp_param_headers_that_agree_with_the_arguments_are_taken(client: Client) -> None:
    mcp, cid = wire(client), f"conv-{uuid.uuid4()}"
    body, headers = mcp.request("tools/call", routed(cid, {"region": "us west 1", "priority": 42}))
    headers |= {"Mcp-Param-Region": "=?base64?dXMgd2VzdCAx?=", "mcp-param-priority": "42"}
    answer = await client.post("/mcp", json=body, headers=headers)
    assert answer.status_code == 200, answer.text
    assert answer.json()["result"]["structuredContent"]["arguments"] == {
        "region": "us west 1",
        "priority": 42,
    }


@pytest.mark.parametrize(
    ("arguments", "params", "why"),
    [
        ({"region": "eu"}, {}, "Mcp-Param-Region header is missing"),
        ({"region": "eu"}, {"Mcp-Param-Region": "us"}, "does not match"),
        ({"region": "eu"}, {"Mcp-Param-Region": "=?base64?ZXU?="}, "malformed base64"),
        ({"region": "eu"}, {"Mcp-Param-Region": "eu", "Mcp-Param-Priority": "1"}, "absent"),
    ],
)
async def test_mcp_param_headers_that_disagree_are_refused_400_header_mismatch_and_nothing_is_recorded(
    client: Client, db: Any, arguments: dict[str, Any], params: dict[str, str], why: str
) -> None:
    mcp, cid = wire(client), f"conv-{uuid.uuid4()}"
    body, headers = mcp.request("tools/call", routed(cid, arguments))
    answer = await client.post("/mcp", json=body, headers={**headers, **params})
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["code"] == HEADER_MISMATCH and why in error["message"]
    recorded = db.execute("SELECT count(*) AS n FROM tool_calls WHERE conversation_id = %s", [cid])
    assert recorded.fetchone()["n"] == 0


async def test_a_tools_own_content_at_2025_11_25_and_its_headers_unchecked_there(client: Client) -> None:
    """The handshake-era wire carries the same content (the SDK's result check at that revision
    lets it through), and SEP-2243's headers, a 2026-07-28 rule, are not asked for there."""
    headers = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "Authorization": f"Bearer {AGENT_TOKEN}",
    }
    ids = iter(range(1, 100))

    async def request(method: str, params: dict[str, Any]) -> dict[str, Any]:
        body = {"jsonrpc": "2.0", "id": next(ids), "method": method, "params": params}
        answer = await client.post("/mcp", json=body, headers=headers)
        assert answer.status_code == 200, answer.text
        if "mcp-session-id" in answer.headers:
            headers.update(
                {"Mcp-Session-Id": answer.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-11-25"}
            )
        result: dict[str, Any] = answer.json()["result"]
        return result

    await request(
        "initialize",
        {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c", "version": "0"}},
    )
    await client.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    cid = f"conv-{uuid.uuid4()}"
    mixed = await request("tools/call", mcp_call("conformance.test-multiple-content-types", {}, cid))
    assert [item["type"] for item in mixed["content"]] == ["text", "image", "resource"]
    assert mixed["structuredContent"]["status"] == "mixed"
    routed = await request("tools/call", mcp_call("conformance.test-custom-headers", {"region": "eu"}, cid))
    assert routed["structuredContent"]["arguments"] == {"region": "eu"}

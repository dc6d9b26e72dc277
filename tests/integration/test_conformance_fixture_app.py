"""The test-only app of the MCP conformance suite's fixture tools (tests/fixtures/conformance_app/,
loaded only by rigs/mcp_conformance.py) answers as the suite's fixtures do, through the engine as
any app: checked here over REST, without the suite (the rig runs the suite itself)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from service.app import create_app
from service.db import code
from service.manifests import Registry
from service.settings import Settings
from tests.conftest import AGENT, registry_with

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

"""SEP-2322's ephemeral input rounds (``service.mcp.input_required``) through the real MCP endpoint
and Postgres: a tool that declares ``input_rounds`` (the conformance fixture app's) answers a
2026-07-28 client ``input_required`` first, writing nothing; the call that completes the rounds
decides once, with what was given in ``p_context.input``; the sealed ``requestState`` is bound to
the tool, its arguments, the conversation and an expiry, and an edited one is refused."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from litestar.testing import AsyncTestClient
from mcp.server import request_state

from harness.mcp import ModernWire
from service.app import create_app
from service.db import code
from service.manifests import Registry
from service.settings import Settings
from tests.conftest import AGENT, make_settings, registry_with

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "conformance_app"
SECRET = "input-rounds-test-secret-0123456789abcdefghij"
ELICITATION = "conformance.test-input-required-result-elicitation"
MULTI_ROUND = "conformance.test-input-required-result-multi-round"
MULTIPLE = "conformance.test-input-required-result-multiple-inputs"
CAPABILITIES = "conformance.test-input-required-result-capabilities"
TOOL_WITH_TASK = "conformance.test-tool-with-task"
ALL = {"elicitation": {}, "sampling": {}, "roots": {"listChanged": True}}


@pytest.fixture
def fixtures_registry(db: Any) -> Registry:
    db.execute((FIXTURES / "decisions.sql").read_text())
    code.declare_tools(db, code.declared_tools([FIXTURES]), only_these=False)
    return registry_with(FIXTURES)


@contextlib.asynccontextmanager
async def _wire(settings: Settings, registry: Registry) -> AsyncIterator[ModernWire]:
    app = create_app(settings, registry, sweeper=False)
    async with AsyncTestClient(app=app) as client:
        client.headers.update(AGENT)
        yield ModernWire(client, "/mcp", declares_tasks=False)


@pytest.fixture
async def wire(database_url: str, fixtures_registry: Registry) -> AsyncIterator[ModernWire]:
    settings = make_settings(database_url, mcp_request_state_secret=SECRET)
    async with _wire(settings, fixtures_registry) as each:
        yield each


def call(
    cid: str,
    tool: str,
    *,
    capabilities: dict[str, Any] | None = None,
    responses: dict[str, Any] | None = None,
    state: str | None = None,
    arguments: dict[str, Any] | None = None,
    call_id: str | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "io.lineup/conversation_id": cid,
        "io.modelcontextprotocol/clientCapabilities": ALL if capabilities is None else capabilities,
    }
    if call_id is not None:
        meta["io.lineup/tool_call_id"] = call_id
    params: dict[str, Any] = {"name": tool, "arguments": arguments or {}, "_meta": meta}
    if responses is not None:
        params["inputResponses"] = responses
    if state is not None:
        params["requestState"] = state
    return params


def accept(content: dict[str, Any]) -> dict[str, Any]:
    return {"action": "accept", "content": content}


def recorded(db: Any, cid: str) -> int:
    return int(
        db.execute("SELECT count(*) AS n FROM tool_calls WHERE conversation_id = %s", [cid]).fetchone()["n"]
    )


def conversation() -> str:
    return f"rounds-{uuid.uuid4()}"


async def test_a_round_asks_writes_nothing_and_the_retry_decides_once_with_what_was_given(
    wire: ModernWire, db: Any
) -> None:
    cid = conversation()
    asked = await wire.result("tools/call", call(cid, ELICITATION))
    assert asked["resultType"] == "input_required"
    assert asked["inputRequests"]["user_name"]["method"] == "elicitation/create"
    assert isinstance(asked["requestState"], str) and "user_name" not in asked["requestState"]
    assert recorded(db, cid) == 0

    done = await wire.result(
        "tools/call",
        call(
            cid, ELICITATION, responses={"user_name": accept({"name": "Alice"})}, state=asked["requestState"]
        ),
    )
    assert done["resultType"] == "complete" and done["isError"] is False
    assert done["structuredContent"]["text"] == "user_name: Hello, Alice!"
    assert done["structuredContent"]["input"] == {"user_name": accept({"name": "Alice"})}
    assert recorded(db, cid) == 1


async def test_rounds_follow_each_other_and_carry_what_was_given_in_the_state(wire: ModernWire) -> None:
    cid = conversation()
    first = await wire.result("tools/call", call(cid, MULTI_ROUND))
    assert list(first["inputRequests"]) == ["step1"]
    second = await wire.result(
        "tools/call",
        call(cid, MULTI_ROUND, responses={"step1": accept({"name": "Alice"})}, state=first["requestState"]),
    )
    assert second["resultType"] == "input_required" and list(second["inputRequests"]) == ["step2"]
    assert second["requestState"] != first["requestState"]
    done = await wire.result(
        "tools/call",
        call(cid, MULTI_ROUND, responses={"step2": accept({"color": "blue"})}, state=second["requestState"]),
    )
    assert set(done["structuredContent"]["input"]) == {"step1", "step2"}


async def test_one_round_may_ask_a_form_a_sampling_and_the_roots_at_once(wire: ModernWire) -> None:
    cid = conversation()
    asked = await wire.result("tools/call", call(cid, MULTIPLE))
    methods = {key: request["method"] for key, request in asked["inputRequests"].items()}
    assert methods == {
        "user_name": "elicitation/create",
        "greeting": "sampling/createMessage",
        "client_roots": "roots/list",
    }
    responses = {
        "user_name": accept({"name": "Alice"}),
        "greeting": {"role": "assistant", "content": {"type": "text", "text": "Hi!"}, "model": "m"},
        "client_roots": {"roots": [{"uri": "file:///work", "name": "work"}]},
    }
    # One missing: asked again, alone, the others kept in the state.
    partial = {key: value for key, value in responses.items() if key != "greeting"}
    again = await wire.result(
        "tools/call", call(cid, MULTIPLE, responses=partial, state=asked["requestState"])
    )
    assert list(again["inputRequests"]) == ["greeting"]
    done = await wire.result(
        "tools/call",
        call(cid, MULTIPLE, responses={"greeting": responses["greeting"]}, state=again["requestState"]),
    )
    assert done["structuredContent"]["text"] == (
        "client_roots: roots file:///work; greeting: Hi!; user_name: Hello, Alice!"
    )


async def test_a_client_is_asked_only_what_its_declared_capabilities_can_run(wire: ModernWire) -> None:
    cid = conversation()
    sampling_only = await wire.result("tools/call", call(cid, CAPABILITIES, capabilities={"sampling": {}}))
    assert [request["method"] for request in sampling_only["inputRequests"].values()] == [
        "sampling/createMessage"
    ]
    # A client that can run none of them is asked nothing: the tool decides without.
    nothing = await wire.result("tools/call", call(cid, CAPABILITIES, capabilities={}))
    assert nothing["resultType"] == "complete"
    assert nothing["structuredContent"]["text"] == "Nothing was given."


async def test_an_edited_state_or_one_of_another_call_is_refused_with_a_json_rpc_error(
    wire: ModernWire, db: Any
) -> None:
    cid = conversation()
    asked = await wire.result("tools/call", call(cid, MULTI_ROUND))
    state = asked["requestState"]
    given = {"step1": accept({"name": "Alice"})}
    raw = bytearray(base64.urlsafe_b64decode(state[3:] + "=" * (-len(state[3:]) % 4)))
    raw[-1] ^= 1
    edited = state[:3] + base64.urlsafe_b64encode(bytes(raw)).decode().rstrip("=")
    for params in (
        call(cid, MULTI_ROUND, responses=given, state=state + "-TAMPERED"),
        call(cid, MULTI_ROUND, responses=given, state=edited),
        call(cid, MULTIPLE, responses=given, state=state),  # another tool
        call(f"other-{cid}", MULTI_ROUND, responses=given, state=state),  # another conversation
    ):
        error = await wire.error("tools/call", params)
        assert (error["code"], error["message"]) == (-32602, "Invalid or expired requestState")
    assert recorded(db, cid) == 0


async def test_a_state_past_its_lifetime_is_refused(
    database_url: str, fixtures_registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = make_settings(database_url, mcp_request_state_secret=SECRET, mcp_request_state_ttl_seconds=10)
    cid = conversation()
    async with _wire(settings, fixtures_registry) as wire:
        asked = await wire.result("tools/call", call(cid, ELICITATION))
        # The SDK's seal reads the wall clock: eleven seconds on, for it alone.
        later = time.time() + 11
        monkeypatch.setattr(request_state, "time", SimpleNamespace(time=lambda: later))
        error = await wire.error(
            "tools/call",
            call(
                cid, ELICITATION, responses={"user_name": accept({"name": "A"})}, state=asked["requestState"]
            ),
        )
        assert (error["code"], error["message"]) == (-32602, "Invalid or expired requestState")


async def test_a_response_of_the_wrong_shape_is_refused_and_a_missing_one_asked_again(
    wire: ModernWire,
) -> None:
    cid = conversation()
    for wrong in (12345, {"action": "accept", "content": {"nom": "Alice"}}, {"action": "maybe"}):
        error = await wire.error("tools/call", call(cid, ELICITATION, responses={"user_name": wrong}))
        assert error["code"] == -32602, error
    again = await wire.result("tools/call", call(cid, ELICITATION, responses={"wrong_key": accept({})}))
    assert again["resultType"] == "input_required" and list(again["inputRequests"]) == ["user_name"]
    # Keys nobody asked are ignored; a declined form is given as it came.
    declined = await wire.result(
        "tools/call",
        call(cid, ELICITATION, responses={"user_name": {"action": "decline"}, "extra": accept({"x": 1})}),
    )
    assert declined["structuredContent"]["input"] == {"user_name": {"action": "decline"}}


async def test_a_call_the_engine_would_refuse_is_refused_before_anything_is_asked(wire: ModernWire) -> None:
    refused = await wire.result("tools/call", call(conversation(), ELICITATION, arguments={"surplus": 1}))
    assert refused["isError"] is True
    assert refused["structuredContent"]["error"] == "invalid_arguments"


async def test_a_replayed_tool_call_id_answers_what_was_decided(wire: ModernWire) -> None:
    cid, call_id = conversation(), f"call-{uuid.uuid4()}"
    first = await wire.result(
        "tools/call",
        call(cid, ELICITATION, responses={"user_name": accept({"name": "Alice"})}, call_id=call_id),
    )
    again = await wire.result(
        "tools/call",
        call(cid, ELICITATION, responses={"user_name": accept({"name": "Bob"})}, call_id=call_id),
    )
    assert again["structuredContent"] == first["structuredContent"]


async def test_without_a_key_nothing_is_asked(database_url: str, fixtures_registry: Registry) -> None:
    settings = make_settings(database_url, mcp_request_state_secret=None, host_session_secret=None)
    async with _wire(settings, fixtures_registry) as wire:
        answered = await wire.result("tools/call", call(conversation(), ELICITATION))
        assert answered["resultType"] == "complete"
        assert answered["structuredContent"]["text"] == "Nothing was given."


async def test_input_rounds_then_a_task_whose_ending_the_tool_words_with_what_was_given(
    wire: ModernWire,
) -> None:
    cid = conversation()
    tasks: dict[str, Any] = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
    capabilities = {"elicitation": {}, **tasks}
    asked = await wire.result("tools/call", call(cid, TOOL_WITH_TASK, capabilities=capabilities))
    assert asked["resultType"] == "input_required" and "taskId" not in asked
    created = await wire.result(
        "tools/call",
        call(
            cid,
            TOOL_WITH_TASK,
            capabilities=capabilities,
            responses={"user_name": accept({"name": "Alice"})},
            state=asked["requestState"],
        ),
    )
    assert created["resultType"] == "task" and "requestState" not in created
    await asyncio.sleep(1.2)  # its one second: the read past the deadline settles it
    got = await wire.result(
        "tasks/get",
        {"taskId": created["taskId"], "_meta": {"io.modelcontextprotocol/clientCapabilities": tasks}},
    )
    assert got["status"] == "completed"
    assert got["result"]["content"][0]["text"] == "Hello, Alice! Computed: completed (deadline_reached)."
    assert got["result"]["structuredContent"]["activity"] == "Hello, Alice!"

"""Bad input gets the contract's 4xx and error body, never a 500 and never a write."""

from __future__ import annotations

from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from harness.calls import start_body
from tests.conftest import AGENT, HOST, OPERATOR

Client = AsyncTestClient[Any]

TABLES = (
    "workspaces",
    "app_instances",
    "sub_sessions",
    "instance_states",
    "operations",
    "outbox",
    "tool_calls",
)


def row_counts(db: Any) -> dict[str, int]:
    return {t: db.execute(f"SELECT count(*) AS n FROM {t}").fetchone()["n"] for t in TABLES}


def valid() -> dict[str, Any]:
    return start_body("conv-1", tool_call_id="bad-input", duration_seconds=60)


def with_arguments(**arguments: Any) -> dict[str, Any]:
    return {**valid(), "arguments": arguments}


def with_interrupt(**arguments: Any) -> dict[str, Any]:
    return {**valid(), "tool": "pomodoro.interrupt", "arguments": arguments}


CASES: list[tuple[str, Any, int, str, str | None]] = [
    # (name, body, status, error, a path expected in details)
    (
        "duration zero",
        with_arguments(duration_seconds=0),
        422,
        "invalid_arguments",
        "arguments.duration_seconds",
    ),
    (
        "duration too long",
        with_arguments(duration_seconds=14401),
        422,
        "invalid_arguments",
        "arguments.duration_seconds",
    ),
    (
        "duration as string",
        with_arguments(duration_seconds="25"),
        422,
        "invalid_arguments",
        "arguments.duration_seconds",
    ),
    (
        "duration as bool",
        with_arguments(duration_seconds=True),
        422,
        "invalid_arguments",
        "arguments.duration_seconds",
    ),
    (
        "duration missing",
        with_arguments(activity="x"),
        422,
        "invalid_arguments",
        "arguments.duration_seconds",
    ),
    (
        "activity too long",
        with_arguments(duration_seconds=60, activity="x" * 201),
        422,
        "invalid_arguments",
        "arguments.activity",
    ),
    (
        "activity as number",
        with_arguments(duration_seconds=60, activity=5),
        422,
        "invalid_arguments",
        "arguments.activity",
    ),
    (
        "extra argument",
        with_arguments(duration_seconds=60, ends_at="2030-01-01T00:00:00Z"),
        422,
        "invalid_arguments",
        "arguments.ends_at",
    ),
    (
        "start with instance_id",
        with_arguments(duration_seconds=60, instance_id="x"),
        422,
        "invalid_arguments",
        "arguments.instance_id",
    ),
    (
        "interrupt with instance_id",
        with_interrupt(instance_id="x"),
        422,
        "invalid_arguments",
        "arguments.instance_id",
    ),
    (
        "interrupt with operation_id",
        with_interrupt(operation_id="x"),
        422,
        "invalid_arguments",
        "arguments.operation_id",
    ),
    (
        "interrupt with app_scope",
        with_interrupt(app_scope="pomodoro"),
        422,
        "invalid_arguments",
        "arguments.app_scope",
    ),
    ("unknown tool", {**valid(), "tool": "pomodoro.explode"}, 404, "unknown_tool", None),
    ("extra top-level field", {**valid(), "instance_id": "x"}, 422, "invalid_request", "instance_id"),
    (
        "missing tool_call_id",
        {k: v for k, v in valid().items() if k != "tool_call_id"},
        422,
        "invalid_request",
        "tool_call_id",
    ),
    ("empty tool_call_id", {**valid(), "tool_call_id": ""}, 422, "invalid_request", "tool_call_id"),
    ("long tool_call_id", {**valid(), "tool_call_id": "x" * 256}, 422, "invalid_request", "tool_call_id"),
    (
        "conversation_id as number",
        {**valid(), "conversation_id": 7},
        422,
        "invalid_request",
        "conversation_id",
    ),
    ("arguments as list", {**valid(), "arguments": [1]}, 422, "invalid_request", "arguments"),
    ("body as list", [valid()], 422, "invalid_request", "$"),
    (
        "NUL in activity",
        with_arguments(duration_seconds=60, activity="a\u0000b"),
        422,
        "invalid_request",
        "arguments.activity",
    ),
    (
        "NUL in conversation_id",
        {**valid(), "conversation_id": "c\u0000"},
        422,
        "invalid_request",
        "conversation_id",
    ),
]


@pytest.mark.parametrize(("name", "body", "status", "error", "path"), CASES, ids=[c[0] for c in CASES])
async def test_bad_tool_call_gets_its_4xx_and_writes_nothing(
    client: Client, db: Any, name: str, body: Any, status: int, error: str, path: str | None
) -> None:
    before = row_counts(db)
    response = await client.post("/v1/tool-calls", json=body, headers=AGENT)
    assert response.status_code == status, response.text
    payload = response.json()
    assert payload["error"] == error
    assert isinstance(payload["message"], str) and payload["message"]
    if path is not None:
        assert path in [d["path"] for d in payload["details"]], payload
    assert row_counts(db) == before


@pytest.mark.parametrize(
    "raw",
    [b"{", b"not json", b'{"tool_call_id": "x",}', b"\xff\xfe", b""],
    ids=["open", "text", "comma", "bytes", "empty"],
)
async def test_malformed_json_is_400_malformed_json(client: Client, db: Any, raw: bytes) -> None:
    response = await client.post(
        "/v1/tool-calls", content=raw, headers={**AGENT, "Content-Type": "application/json"}
    )
    assert response.status_code == 400
    assert response.json()["error"] == "malformed_json"
    assert row_counts(db)["tool_calls"] == 0


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer wrong-token-wrong-token"}, {"Authorization": "Basic abc"}, HOST, OPERATOR],
    ids=["missing", "wrong", "not-bearer", "host-token", "operator-token"],
)
async def test_agent_api_refuses_missing_wrong_or_other_audience_tokens(
    client: Client, db: Any, headers: dict[str, str]
) -> None:
    for method, path, body in [
        ("GET", "/v1/tools", None),
        ("POST", "/v1/tool-calls", valid()),
        ("GET", "/v1/operations/00000000-0000-0000-0000-000000000000", None),
    ]:
        response = await client.request(method, path, json=body, headers=headers)
        assert response.status_code == 401, (path, response.text)
        assert response.json()["error"] == "unauthorized"
    assert row_counts(db)["tool_calls"] == 0


async def test_oversized_body_is_413_not_500(client: Client) -> None:
    body = with_arguments(duration_seconds=60, activity="x" * 200)
    body["padding"] = "y" * 200_000
    response = await client.post("/v1/tool-calls", json=body, headers=AGENT)
    assert response.status_code == 413
    assert response.json()["error"] == "request_too_large"


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"target": "elsewhere"},
        {"target": {"app_scope": 5}},
        {"target": {"app_scope": "whiteboard", "x": 1}},
        {"target": "interact", "extra": 1},
    ],
)
async def test_bad_foreground_bodies_are_422(client: Client, db: Any, body: Any) -> None:
    response = await client.post("/v1/host/conversations/c/workspace/foreground", json=body, headers=HOST)
    assert response.status_code == 422, response.text
    assert response.json()["error"] == "invalid_request"
    assert row_counts(db)["workspaces"] == 0


async def test_unknown_route_is_404_with_error_body(client: Client) -> None:
    response = await client.get("/v1/nothing-here", headers=AGENT)
    assert response.status_code == 404
    assert response.json()["error"] == "not_found"


async def test_wrong_method_is_405_with_error_body(client: Client) -> None:
    response = await client.delete("/v1/tool-calls", headers=AGENT)
    assert response.status_code == 405
    assert response.json()["error"] == "method_not_allowed"


async def test_deeply_nested_json_is_400_not_500(client: Client) -> None:
    raw = b'{"a":' + b"[" * 5000 + b"]" * 5000 + b"}"
    response = await client.post(
        "/v1/tool-calls", content=raw, headers={**AGENT, "Content-Type": "application/json"}
    )
    assert response.status_code == 400
    assert response.json()["error"] == "malformed_json"


@pytest.mark.parametrize("inner", [b'"x\\u0000"', b"1"])
async def test_deeply_nested_arguments_are_a_4xx_not_500(client: Client, inner: bytes) -> None:
    raw = (
        b'{"tool_call_id":"t","conversation_id":"c","tool":"pomodoro.start","arguments":{"duration_seconds":'
        + b"[" * 5000
        + inner
        + b"]" * 5000
        + b"}}"
    )
    response = await client.post(
        "/v1/tool-calls", content=raw, headers={**AGENT, "Content-Type": "application/json"}
    )
    assert response.status_code in (400, 422), response.text

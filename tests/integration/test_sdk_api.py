"""The SDK API behind instance capabilities: minting, who may call what, context, navigation close."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from harness.calls import expire, interrupt_body
from tests.conftest import AGENT, HOST, OPERATOR, UNKNOWN_UUID
from tests.support.sdk import Client, bearer, mint, open_whiteboard, sdk_headers, start_pomodoro

SDK_CALLS = [
    ("GET", "/v1/sdk/context", None),
    ("GET", "/v1/sdk/state", None),
    ("PUT", "/v1/sdk/state", {"expected_revision": 0, "data": {}}),
    ("POST", "/v1/sdk/navigation/close", None),
]


async def sdk_call(client: Client, method: str, path: str, body: Any, headers: dict[str, str]) -> Any:
    return await client.request(method, path, headers=headers, json=body)


async def test_host_mints_a_capability_stored_only_as_its_sha256(client: Client, db: Any) -> None:
    started = await start_pomodoro(client, "conv-1")
    response = await client.post(f"/v1/host/instances/{started['instance_id']}/capability", headers=HOST)
    assert response.status_code == 200
    assert set(response.json()) == {"capability"}
    assert "no-store" in response.headers["cache-control"]
    token = response.json()["capability"]
    assert len(token) >= 43

    rows = db.execute("SELECT c.*, c::text AS whole_row FROM capabilities c").fetchall()
    assert len(rows) == 1
    row = rows[0]
    assert bytes(row["token_hash"]) == hashlib.sha256(token.encode()).digest()
    assert (str(row["instance_id"]), row["app_scope"], row["conversation_id"]) == (
        started["instance_id"],
        "pomodoro",
        "conv-1",
    )
    assert token not in row["whole_row"]
    assert token.encode().hex() not in row["whole_row"]


async def test_every_mint_is_a_new_token_and_each_one_works(client: Client) -> None:
    started = await start_pomodoro(client)
    first, second = await mint(client, started["instance_id"]), await mint(client, started["instance_id"])
    assert first != second
    for token in (first, second):
        response = await client.get("/v1/sdk/context", headers=bearer(token))
        assert response.status_code == 200
        assert response.json()["instance_id"] == started["instance_id"]


@pytest.mark.parametrize("instance_id", [UNKNOWN_UUID, "not-a-uuid"])
async def test_minting_for_an_unknown_instance_is_404(client: Client, db: Any, instance_id: str) -> None:
    response = await client.post(f"/v1/host/instances/{instance_id}/capability", headers=HOST)
    assert response.status_code == 404
    assert response.json()["error"] == "unknown_instance"
    assert db.execute("SELECT count(*) AS n FROM capabilities").fetchone()["n"] == 0


async def test_minting_takes_the_host_token_and_no_other(client: Client) -> None:
    started = await start_pomodoro(client)
    path = f"/v1/host/instances/{started['instance_id']}/capability"
    capability = await sdk_headers(client, started["instance_id"])
    for headers in ({}, AGENT, OPERATOR, capability, bearer("nonsense")):
        response = await client.post(path, headers=headers)
        assert response.status_code == 401
        assert response.json()["error"] == "unauthorized"


async def test_a_closed_instance_still_gets_a_capability_that_reads_its_history(client: Client) -> None:
    started = await start_pomodoro(client)
    await client.post(f"/v1/host/instances/{started['instance_id']}/close", headers=HOST)
    headers = await sdk_headers(client, started["instance_id"])
    context = await client.get("/v1/sdk/context", headers=headers)
    assert context.status_code == 200
    assert context.json()["status"] == "closed"
    assert context.json()["operation"]["state"] == "cancelled"
    state = await client.get("/v1/sdk/state", headers=headers)
    assert state.status_code == 200
    assert state.json()["readonly"] is True


@pytest.mark.parametrize(("method", "path", "body"), SDK_CALLS)
async def test_sdk_without_a_valid_capability_is_401(
    client: Client, db: Any, method: str, path: str, body: Any
) -> None:
    started = await start_pomodoro(client)
    for headers in (
        {},
        bearer("unknown-capability"),
        {"Authorization": "Basic dXNlcjpwYXNz"},
        {"Authorization": "Bearer "},
        HOST,
        AGENT,
        OPERATOR,
    ):
        response = await sdk_call(client, method, path, body, headers)
        assert response.status_code == 401, (headers, response.text)
        assert response.json()["error"] == "unauthorized"
        assert response.json()["message"]
    instance = db.execute(
        "SELECT status FROM app_instances WHERE instance_id = %s", [started["instance_id"]]
    ).fetchone()
    assert instance["status"] == "open"


async def test_a_capability_is_refused_on_every_other_api(client: Client, db: Any) -> None:
    started = await start_pomodoro(client, "conv-1")
    instance_id, operation_id = started["instance_id"], started["operation"]["operation_id"]
    headers = await sdk_headers(client, instance_id)
    calls: list[tuple[str, str, Any]] = [
        ("GET", "/v1/tools", None),
        ("POST", "/v1/tool-calls", interrupt_body("conv-1")),
        ("GET", f"/v1/operations/{operation_id}", None),
        ("GET", "/v1/host/conversations/conv-1/workspace", None),
        ("POST", "/v1/host/conversations/conv-1/workspace/foreground", {"target": "interact"}),
        ("POST", f"/v1/host/instances/{instance_id}/close", None),
        ("POST", f"/v1/host/instances/{instance_id}/capability", None),
        ("POST", f"/v1/host/instances/{instance_id}/surface-events", {"event": "dimmed"}),
        ("GET", "/v1/ops/outbox", None),
        ("GET", "/v1/ops/stats", None),
        ("GET", "/v1/ops/operations", None),
    ]
    for method, path, body in calls:
        response = await sdk_call(client, method, path, body, headers)
        assert response.status_code == 401, (path, response.text)
        assert response.json()["error"] == "unauthorized"
    operation = db.execute("SELECT state FROM operations WHERE operation_id = %s", [operation_id]).fetchone()
    assert operation["state"] == "focusing"
    assert db.execute("SELECT count(*) AS n FROM capabilities").fetchone()["n"] == 1


async def test_context_of_a_focusing_pomodoro_is_its_operation(client: Client) -> None:
    started = await start_pomodoro(client, "conv-7", duration_seconds=1500, activity="write report")
    headers = await sdk_headers(client, started["instance_id"])
    response = await client.get("/v1/sdk/context", headers=headers)
    assert response.status_code == 200
    context = response.json()
    operation = started["operation"]
    assert context == {
        "app_scope": "pomodoro",
        "instance_id": started["instance_id"],
        "conversation_id": "conv-7",
        "status": "open",
        "operation": {
            "operation_id": operation["operation_id"],
            "state": "focusing",
            "reason": None,
            "activity": "write report",
            "started_at": operation["started_at"],
            "ends_at": operation["ends_at"],
        },
        "server_time": context["server_time"],
    }
    assert operation["started_at"] <= context["server_time"] < operation["ends_at"]


async def test_context_settles_an_overdue_operation_as_completed_first(client: Client, db: Any) -> None:
    started = await start_pomodoro(client)
    headers = await sdk_headers(client, started["instance_id"])
    expire(db, started["operation"]["operation_id"])
    ends_at = db.execute(
        "SELECT rfc3339(ends_at) AS ends_at FROM operations WHERE operation_id = %s",
        [started["operation"]["operation_id"]],
    ).fetchone()["ends_at"]

    context = (await client.get("/v1/sdk/context", headers=headers)).json()
    assert context["status"] == "closed"
    assert context["operation"]["state"] == "completed"
    assert context["operation"]["reason"] == "deadline_reached"
    assert context["operation"]["ends_at"] == ends_at
    assert db.execute("SELECT count(*) AS n FROM outbox").fetchone()["n"] == 1
    again = (await client.get("/v1/sdk/context", headers=headers)).json()
    assert again["operation"] == context["operation"]
    assert db.execute("SELECT count(*) AS n FROM outbox").fetchone()["n"] == 1


async def test_context_of_an_app_without_an_operation_has_operation_null(client: Client) -> None:
    instance_id = await open_whiteboard(client, "conv-w")
    context = (await client.get("/v1/sdk/context", headers=await sdk_headers(client, instance_id))).json()
    assert context["app_scope"] == "whiteboard"
    assert context["instance_id"] == instance_id
    assert context["conversation_id"] == "conv-w"
    assert context["status"] == "open"
    assert context["operation"] is None


async def test_navigation_close_is_the_lifecycle_close_and_answers_the_same_twice(
    client: Client, db: Any
) -> None:
    started = await start_pomodoro(client)
    headers = await sdk_headers(client, started["instance_id"])
    first = await client.post("/v1/sdk/navigation/close", headers=headers)
    assert first.status_code == 200
    assert first.json() == {
        "instance_id": started["instance_id"],
        "app_scope": "pomodoro",
        "status": "closed",
        "operation": {
            "operation_id": started["operation"]["operation_id"],
            "state": "cancelled",
            "reason": "app_closed",
        },
    }
    second = await client.post("/v1/sdk/navigation/close", headers=headers)
    assert (second.status_code, second.json()) == (200, first.json())
    by_host = await client.post(f"/v1/host/instances/{started['instance_id']}/close", headers=HOST)
    assert (by_host.status_code, by_host.json()) == (200, first.json())
    assert db.execute("SELECT count(*) AS n FROM outbox").fetchone()["n"] == 1
    workspace = (await client.get("/v1/host/conversations/conv-1/workspace", headers=HOST)).json()
    assert workspace["foreground"] == "interact"


async def test_navigation_close_never_rewrites_a_final_operation(client: Client, db: Any) -> None:
    started = await start_pomodoro(client)
    headers = await sdk_headers(client, started["instance_id"])
    await client.post("/v1/tool-calls", json=interrupt_body("conv-1"), headers=AGENT)
    response = await client.post("/v1/sdk/navigation/close", headers=headers)
    assert response.status_code == 200
    assert (response.json()["operation"]["state"], response.json()["operation"]["reason"]) == (
        "interrupted",
        "agent_interrupt",
    )
    assert db.execute("SELECT count(*) AS n FROM outbox").fetchone()["n"] == 1


async def test_after_close_the_capability_still_reads_context_and_state(client: Client) -> None:
    started = await start_pomodoro(client)
    headers = await sdk_headers(client, started["instance_id"])
    await client.post("/v1/sdk/navigation/close", headers=headers)
    context = await client.get("/v1/sdk/context", headers=headers)
    assert context.status_code == 200
    assert context.json()["status"] == "closed"
    assert context.json()["operation"]["ends_at"] == started["operation"]["ends_at"]
    state = await client.get("/v1/sdk/state", headers=headers)
    assert state.status_code == 200
    assert state.json() == {"schema_version": 1, "revision": 0, "data": {}, "readonly": True}

"""Whiteboard's SDK isolation regression: its capability reaches only its own instance and state,
and Pomodoro's capability never reaches Whiteboard's."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.conftest import HOST
from tests.support.sdk import (
    Client,
    get_state,
    open_whiteboard,
    put_state,
    sdk_headers,
    start_pomodoro,
)

STROKES = {"strokes": [{"color": "#ff0000", "width": 3, "points": [[0, 0], [10.5, 20]]}]}
POMODORO_DATA = {"activity": "write report", "display_state": "focusing"}


async def both(client: Client) -> tuple[dict[str, Any], dict[str, str], str, dict[str, str]]:
    """Whiteboard and then a focusing Pomodoro, both open in one conversation."""
    whiteboard_id = await open_whiteboard(client, "conv-1")
    pomodoro = await start_pomodoro(client, "conv-1")
    workspace = (await client.get("/v1/host/conversations/conv-1/workspace", headers=HOST)).json()
    assert {(i["app_scope"], i["status"]) for i in workspace["instances"]} == {
        ("whiteboard", "open"),
        ("pomodoro", "open"),
    }
    return (
        pomodoro,
        await sdk_headers(client, pomodoro["instance_id"]),
        whiteboard_id,
        await sdk_headers(client, whiteboard_id),
    )


def compact_length(data: Any) -> int:
    return len(json.dumps(data, separators=(",", ":")))


def strokes_of_size(size: int) -> dict[str, Any]:
    """Valid Whiteboard data whose compact JSON is exactly ``size`` bytes, padded by widening
    coordinates (10**n is n bytes longer than 1; n stays under Python's int-to-str limit)."""
    points = [[1, 1] for _ in range(1000)]
    data = {"strokes": [{"color": "#000000", "width": 1, "points": points}]}
    missing = size - compact_length(data)
    for point in points:
        digits = min(missing, 3000)
        point[0] = 10**digits
        missing -= digits
    assert missing == 0
    assert compact_length(data) == size
    return data


def snapshot_row(db: Any, instance_id: str) -> Any:
    return db.execute("SELECT * FROM instance_states WHERE instance_id = %s", [instance_id]).fetchone()


async def test_each_capability_sees_only_its_own_instance(client: Client) -> None:
    pomodoro, pomodoro_headers, whiteboard_id, whiteboard_headers = await both(client)
    whiteboard_context = (await client.get("/v1/sdk/context", headers=whiteboard_headers)).json()
    assert (whiteboard_context["app_scope"], whiteboard_context["instance_id"]) == (
        "whiteboard",
        whiteboard_id,
    )
    assert whiteboard_context["operation"] is None
    pomodoro_context = (await client.get("/v1/sdk/context", headers=pomodoro_headers)).json()
    assert (pomodoro_context["app_scope"], pomodoro_context["instance_id"]) == (
        "pomodoro",
        pomodoro["instance_id"],
    )
    assert pomodoro_context["operation"]["operation_id"] == pomodoro["operation"]["operation_id"]
    assert (await get_state(client, whiteboard_headers))["schema_version"] == 1
    assert (await get_state(client, whiteboard_headers))["data"] == {}


async def test_whiteboard_writes_never_reach_pomodoro_and_the_reverse(client: Client, db: Any) -> None:
    pomodoro, pomodoro_headers, whiteboard_id, whiteboard_headers = await both(client)
    assert (await put_state(client, whiteboard_headers, 0, STROKES)).json() == {"revision": 1}
    assert await get_state(client, pomodoro_headers) == {
        "schema_version": 1,
        "revision": 0,
        "data": {},
        "readonly": False,
    }
    assert (await put_state(client, pomodoro_headers, 0, POMODORO_DATA)).json() == {"revision": 1}
    whiteboard_state = await get_state(client, whiteboard_headers)
    assert (whiteboard_state["revision"], whiteboard_state["data"]) == (1, STROKES)
    assert snapshot_row(db, whiteboard_id)["data"] == STROKES
    assert snapshot_row(db, pomodoro["instance_id"])["data"] == POMODORO_DATA


async def test_each_app_is_held_to_its_own_schema(client: Client, db: Any) -> None:
    pomodoro, pomodoro_headers, whiteboard_id, whiteboard_headers = await both(client)
    into_whiteboard = await put_state(client, whiteboard_headers, 0, POMODORO_DATA)
    assert into_whiteboard.status_code == 422
    assert into_whiteboard.json()["error"] == "state_schema_violation"
    assert {d["path"] for d in into_whiteboard.json()["details"]} == {"data.activity", "data.display_state"}
    into_pomodoro = await put_state(client, pomodoro_headers, 0, STROKES)
    assert into_pomodoro.status_code == 422
    assert [d["path"] for d in into_pomodoro.json()["details"]] == ["data.strokes"]
    # Each app's own max_bytes: 5834 bytes is within Whiteboard's 65536 but over Pomodoro's 4096.
    big = {"strokes": [{"color": "#000000", "width": 1, "points": [[i, i] for i in range(600)]}]}
    assert (await put_state(client, whiteboard_headers, 0, big)).status_code == 200
    assert (await put_state(client, pomodoro_headers, 0, big)).json()["error"] == "state_too_large"
    assert snapshot_row(db, pomodoro["instance_id"])["revision"] == 0
    assert snapshot_row(db, whiteboard_id)["revision"] == 1


@pytest.mark.parametrize("field", ["instance_id", "app_scope", "conversation_id"])
async def test_a_body_that_names_an_instance_scope_or_conversation_is_refused(
    client: Client, db: Any, field: str
) -> None:
    pomodoro, _, whiteboard_id, whiteboard_headers = await both(client)
    target = {"instance_id": pomodoro["instance_id"], "app_scope": "pomodoro", "conversation_id": "conv-1"}
    response = await client.put(
        "/v1/sdk/state",
        json={"expected_revision": 0, "data": POMODORO_DATA, field: target[field]},
        headers=whiteboard_headers,
    )
    assert response.status_code == 422
    assert response.json()["error"] == "invalid_request"
    assert [d["path"] for d in response.json()["details"]] == [field]
    assert snapshot_row(db, pomodoro["instance_id"])["revision"] == 0
    assert snapshot_row(db, whiteboard_id)["revision"] == 0


async def test_query_parameters_cannot_point_a_capability_elsewhere(client: Client) -> None:
    pomodoro, _, whiteboard_id, whiteboard_headers = await both(client)
    elsewhere = f"?instance_id={pomodoro['instance_id']}&app_scope=pomodoro"
    context = (await client.get(f"/v1/sdk/context{elsewhere}", headers=whiteboard_headers)).json()
    assert context["instance_id"] == whiteboard_id
    written = await client.put(
        f"/v1/sdk/state{elsewhere}",
        json={"expected_revision": 0, "data": STROKES},
        headers=whiteboard_headers,
    )
    assert written.json() == {"revision": 1}
    state = (await client.get(f"/v1/sdk/state{elsewhere}", headers=whiteboard_headers)).json()
    assert state["data"] == STROKES


async def test_whiteboard_navigation_close_closes_only_whiteboard(client: Client, db: Any) -> None:
    _, pomodoro_headers, whiteboard_id, whiteboard_headers = await both(client)
    closed = await client.post("/v1/sdk/navigation/close", headers=whiteboard_headers)
    assert closed.json() == {
        "instance_id": whiteboard_id,
        "app_scope": "whiteboard",
        "status": "closed",
        "operation": None,
    }
    context = (await client.get("/v1/sdk/context", headers=pomodoro_headers)).json()
    assert (context["status"], context["operation"]["state"]) == ("open", "focusing")
    assert (await put_state(client, pomodoro_headers, 0, POMODORO_DATA)).json() == {"revision": 1}
    assert db.execute("SELECT count(*) AS n FROM outbox").fetchone()["n"] == 0


async def test_pomodoro_ending_leaves_whiteboard_writable(client: Client) -> None:
    _, pomodoro_headers, _, whiteboard_headers = await both(client)
    await client.post("/v1/sdk/navigation/close", headers=pomodoro_headers)
    assert (await get_state(client, pomodoro_headers))["readonly"] is True
    assert (await get_state(client, whiteboard_headers))["readonly"] is False
    assert (await put_state(client, whiteboard_headers, 0, STROKES)).json() == {"revision": 1}


async def test_whiteboard_delete_on_close_removes_its_snapshot(client: Client, db: Any) -> None:
    whiteboard_id = await open_whiteboard(client, "conv-1")
    headers = await sdk_headers(client, whiteboard_id)
    assert (await put_state(client, headers, 0, STROKES)).json() == {"revision": 1}
    closed = await client.post(f"/v1/host/instances/{whiteboard_id}/close", headers=HOST)
    assert closed.status_code == 200
    assert snapshot_row(db, whiteboard_id) is None
    assert await get_state(client, headers) == {
        "schema_version": 1,
        "revision": 0,
        "data": {},
        "readonly": True,
        "deleted": True,
    }
    for revision in (0, 1):
        response = await put_state(client, headers, revision, STROKES)
        assert (response.status_code, response.json()["error"]) == (409, "state_readonly")
    assert snapshot_row(db, whiteboard_id) is None
    context = (await client.get("/v1/sdk/context", headers=headers)).json()
    assert context["status"] == "closed"


async def test_reopening_whiteboard_is_a_new_instance_with_an_empty_snapshot(client: Client) -> None:
    first = await open_whiteboard(client, "conv-1")
    first_headers = await sdk_headers(client, first)
    await put_state(client, first_headers, 0, STROKES)
    await client.post("/v1/sdk/navigation/close", headers=first_headers)
    second = await open_whiteboard(client, "conv-1")
    assert second != first
    second_headers = await sdk_headers(client, second)
    assert await get_state(client, second_headers) == {
        "schema_version": 1,
        "revision": 0,
        "data": {},
        "readonly": False,
    }
    assert (await get_state(client, first_headers))["deleted"] is True


async def test_whiteboard_is_measured_against_its_own_max_bytes_not_the_request_limit(
    client: Client, db: Any
) -> None:
    whiteboard_id = await open_whiteboard(client, "conv-1")
    headers = await sdk_headers(client, whiteboard_id)
    over = await put_state(client, headers, 0, strokes_of_size(65537))
    assert (over.status_code, over.json()["error"]) == (413, "state_too_large")
    at_limit = strokes_of_size(65536)
    assert (await put_state(client, headers, 0, at_limit)).json() == {"revision": 1}
    assert snapshot_row(db, whiteboard_id)["data"] == at_limit
    await client.post(f"/v1/host/instances/{whiteboard_id}/close", headers=HOST)
    closed = await put_state(client, headers, 1, strokes_of_size(200_000))
    assert (closed.status_code, closed.json()["error"]) == (409, "state_readonly")

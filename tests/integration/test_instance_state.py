"""app.instance-state.v1 through the SDK: revisions, the contract's error order, retention."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from harness.calls import expire, interrupt_body
from service.app import create_app
from service.db import states as states_db
from service.settings import Settings
from tests.conftest import AGENT, HOST, registry_with
from tests.support.sdk import (
    Call,
    Client,
    concurrently,
    get_state,
    put_state,
    sdk_headers,
    start_pomodoro,
)

OPERATION_ID = "0b6f5a52-3f5e-4c4b-9a51-3d1f2f7a1c11"
DISPLAY = {
    "activity": "write report",
    "operation_id": OPERATION_ID,
    "started_at": "2026-11-30T08:00:00Z",
    "ends_at": "2026-11-30T08:25:00Z",
    "display_state": "focusing",
}
TOO_LARGE = {"activity": "é" * 3000}  # 6015 bytes > 4096, and over maxLength 200 as well

# A manifest that uses no Runtime feature: its instances have no snapshot.
SKETCH = {
    "manifest_version": 1,
    "app_scope": "sketch",
    "name": "Sketch",
    "description": "A workspace app that declares no instance state.",
    "surface": {"kind": "workspace", "entry": "/apps/sketch/"},
    "tools": [],
}


async def pomodoro(client: Client, conversation_id: str = "conv-1") -> tuple[dict[str, Any], dict[str, str]]:
    started = await start_pomodoro(client, conversation_id)
    return started, await sdk_headers(client, started["instance_id"])


def snapshot_row(db: Any, instance_id: str) -> Any:
    return db.execute("SELECT * FROM instance_states WHERE instance_id = %s", [instance_id]).fetchone()


def error_of(response: Any) -> str:
    return str(response.json()["error"])


@pytest.fixture
async def sketch_client(settings: Settings, tmp_path: Path) -> AsyncIterator[Client]:
    """The service with an extra app, ``sketch``, whose manifest lacks app.instance-state.v1."""
    (tmp_path / "sketch" / "surface").mkdir(parents=True)
    (tmp_path / "sketch" / "manifest.json").write_text(json.dumps(SKETCH))
    (tmp_path / "sketch" / "surface" / "index.html").write_text("<!doctype html><title>Sketch</title>")
    app = create_app(settings, registry_with(tmp_path / "sketch"), sweeper=False)
    async with AsyncTestClient(app=app) as test_client:
        yield test_client


async def test_a_new_snapshot_starts_at_revision_0_with_empty_data(client: Client) -> None:
    _, headers = await pomodoro(client)
    assert await get_state(client, headers) == {
        "schema_version": 1,
        "revision": 0,
        "data": {},
        "readonly": False,
    }


async def test_writes_advance_the_revision_0_1_2_and_reads_return_the_data(client: Client, db: Any) -> None:
    started, headers = await pomodoro(client)
    first = await put_state(client, headers, 0, DISPLAY)
    assert (first.status_code, first.json()) == (200, {"revision": 1})
    second_data = {**DISPLAY, "activity": None, "display_state": "completed"}
    second = await put_state(client, headers, 1, second_data)
    assert (second.status_code, second.json()) == (200, {"revision": 2})
    assert await get_state(client, headers) == {
        "schema_version": 1,
        "revision": 2,
        "data": second_data,
        "readonly": False,
    }
    row = snapshot_row(db, started["instance_id"])
    assert (row["revision"], row["data"], row["readonly"]) == (2, second_data, False)


async def test_state_writes_never_touch_the_operation_or_the_outbox(client: Client, db: Any) -> None:
    started, headers = await pomodoro(client)
    claims_completion = {**DISPLAY, "operation_id": started["operation"]["operation_id"]}
    claims_completion["display_state"] = "completed"
    assert (await put_state(client, headers, 0, claims_completion)).status_code == 200
    operation = db.execute(
        "SELECT state, finalized_at FROM operations WHERE operation_id = %s",
        [started["operation"]["operation_id"]],
    ).fetchone()
    assert (operation["state"], operation["finalized_at"]) == ("focusing", None)
    assert db.execute("SELECT count(*) AS n FROM outbox").fetchone()["n"] == 0


@pytest.mark.parametrize(
    "body",
    [
        {"data": {}},
        {"expected_revision": 0},
        {"expected_revision": -1, "data": {}},
        {"expected_revision": True, "data": {}},
        {"expected_revision": 0.0, "data": {}},
        {"expected_revision": "0", "data": {}},
        {"expected_revision": None, "data": {}},
        {"expected_revision": 2**63, "data": {}},
        {"expected_revision": 0, "data": []},
        {"expected_revision": 0, "data": None},
        {"expected_revision": 0, "data": "{}"},
        {"expected_revision": 0, "data": {}, "instance_id": str(uuid.uuid4())},
        {"expected_revision": 0, "data": {}, "app_scope": "whiteboard"},
        {"expected_revision": 0, "data": {}, "revision": 1},
        {"expected_revision": 0, "data": {"activity": "nul\x00"}},
        [0, {}],
        "state",
    ],
)
async def test_a_body_of_the_wrong_shape_is_422_invalid_request(client: Client, db: Any, body: Any) -> None:
    started, headers = await pomodoro(client)
    response = await client.put("/v1/sdk/state", json=body, headers=headers)
    assert response.status_code == 422, response.text
    assert error_of(response) == "invalid_request"
    assert response.json()["details"]
    assert snapshot_row(db, started["instance_id"])["revision"] == 0


async def test_a_body_that_is_not_json_is_400_malformed_json(client: Client) -> None:
    _, headers = await pomodoro(client)
    response = await client.put(
        "/v1/sdk/state",
        content=b'{"expected_revision": 0,',
        headers={**headers, "content-type": "application/json"},
    )
    assert response.status_code == 400
    assert error_of(response) == "malformed_json"


async def test_feature_not_declared_comes_before_every_other_check(sketch_client: Client) -> None:
    opened = await sketch_client.post(
        "/v1/host/conversations/conv-s/workspace/foreground",
        json={"target": {"app_scope": "sketch"}},
        headers=HOST,
    )
    instance_id = opened.json()["foreground"]["instance_id"]
    headers = await sdk_headers(sketch_client, instance_id)

    read = await sketch_client.get("/v1/sdk/state", headers=headers)
    assert (read.status_code, error_of(read)) == (403, "feature_not_declared")
    for body in ({"expected_revision": 0, "data": {}}, {"expected_revision": "x", "extra": 1}, [1]):
        response = await sketch_client.put("/v1/sdk/state", json=body, headers=headers)
        assert (response.status_code, error_of(response)) == (403, "feature_not_declared")
    not_json = await sketch_client.put("/v1/sdk/state", content=b"{", headers=headers)
    assert (not_json.status_code, error_of(not_json)) == (403, "feature_not_declared")
    # The rest of the SDK still works for such an app.
    context = await sketch_client.get("/v1/sdk/context", headers=headers)
    assert context.status_code == 200
    assert (context.json()["app_scope"], context.json()["operation"]) == ("sketch", None)


async def test_invalid_request_comes_before_state_readonly(client: Client) -> None:
    started, headers = await pomodoro(client)
    await client.post(f"/v1/host/instances/{started['instance_id']}/close", headers=HOST)
    response = await client.put(
        "/v1/sdk/state", json={"expected_revision": 0, "data": {}, "instance_id": "x"}, headers=headers
    )
    assert (response.status_code, error_of(response)) == (422, "invalid_request")


async def test_state_readonly_comes_before_state_too_large(client: Client) -> None:
    started, headers = await pomodoro(client)
    await client.post(f"/v1/host/instances/{started['instance_id']}/close", headers=HOST)
    response = await put_state(client, headers, 0, TOO_LARGE)
    assert (response.status_code, error_of(response)) == (409, "state_readonly")


async def test_state_too_large_comes_before_state_schema_violation(client: Client) -> None:
    _, headers = await pomodoro(client)
    response = await put_state(client, headers, 0, {**TOO_LARGE, "remaining_seconds": 1})
    assert (response.status_code, error_of(response)) == (413, "state_too_large")
    assert response.json()["max_bytes"] == 4096


async def test_state_schema_violation_comes_before_revision_conflict(client: Client) -> None:
    _, headers = await pomodoro(client)
    response = await put_state(client, headers, 7, {"remaining_seconds": 1200})
    assert (response.status_code, error_of(response)) == (422, "state_schema_violation")


async def test_revision_conflict_carries_the_current_revision(client: Client, db: Any) -> None:
    started, headers = await pomodoro(client)
    assert (await put_state(client, headers, 0, DISPLAY)).status_code == 200
    for stale in (0, 2, 99):
        response = await put_state(client, headers, stale, {"display_state": "completed"})
        assert response.status_code == 409
        assert response.json()["error"] == "revision_conflict"
        assert response.json()["revision"] == 1
        assert response.json()["message"]
    assert snapshot_row(db, started["instance_id"])["data"] == DISPLAY


async def test_max_bytes_is_measured_on_compact_utf8_json(client: Client) -> None:
    _, headers = await pomodoro(client)
    # {"activity":"…"} takes 15 bytes around the string; "é" is one character but two bytes.
    exactly = {"activity": "é" * 2040 + "a"}  # 2056 characters, 4096 bytes
    over = {"activity": "é" * 2040 + "ab"}  # 2057 characters, 4097 bytes
    assert len(json.dumps(exactly, separators=(",", ":"), ensure_ascii=False)) < 4096
    fits = await put_state(client, headers, 0, exactly)
    # It fits (with spaces or \u escapes it would not), so the schema is what refuses it.
    assert (fits.status_code, error_of(fits)) == (422, "state_schema_violation")
    too_large = await put_state(client, headers, 0, over)
    assert (too_large.status_code, error_of(too_large)) == (413, "state_too_large")
    assert too_large.json()["size_bytes"] == 4097


@pytest.mark.parametrize(
    ("data", "path"),
    [
        ({"remaining_seconds": 1200}, "data.remaining_seconds"),
        ({"operation_id": "not-a-uuid"}, "data.operation_id"),
        ({"started_at": "yesterday"}, "data.started_at"),
        ({"ends_at": "2026-11-30 08:25"}, "data.ends_at"),
        ({"display_state": "paused"}, "data.display_state"),
        ({"activity": "x" * 201}, "data.activity"),
        ({"activity": 7}, "data.activity"),
    ],
)
async def test_schema_violations_are_refused_with_their_paths(
    client: Client, db: Any, data: dict[str, Any], path: str
) -> None:
    started, headers = await pomodoro(client)
    response = await put_state(client, headers, 0, {**DISPLAY, **data})
    assert response.status_code == 422
    assert response.json()["error"] == "state_schema_violation"
    assert [d["path"] for d in response.json()["details"]] == [path]
    assert snapshot_row(db, started["instance_id"])["revision"] == 0


async def test_concurrent_writes_with_the_same_expected_revision_exactly_one_wins(
    client: Client, db: Any
) -> None:
    started, headers = await pomodoro(client)
    bodies = [{"expected_revision": 0, "data": {"activity": f"writer {i}"}} for i in range(10)]
    responses = await concurrently(client, [("PUT", "/v1/sdk/state", headers, body) for body in bodies])
    winners = [i for i, r in enumerate(responses) if r.status_code == 200]
    assert len(winners) == 1, [r.text for r in responses]
    assert responses[winners[0]].json() == {"revision": 1}
    for response in responses:
        if response.status_code != 200:
            assert (response.status_code, response.json()["error"]) == (409, "revision_conflict")
            assert response.json()["revision"] == 1
    row = snapshot_row(db, started["instance_id"])
    assert (row["revision"], row["data"]) == (1, bodies[winners[0]]["data"])


async def test_writes_racing_a_close_win_or_lose_cleanly(client: Client, db: Any) -> None:
    started, headers = await pomodoro(client)
    datas = [{"activity": f"writer {i}"} for i in range(8)]
    close: Call = ("POST", f"/v1/host/instances/{started['instance_id']}/close", HOST, None)
    writes: list[Call] = [
        ("PUT", "/v1/sdk/state", headers, {"expected_revision": 0, "data": d}) for d in datas
    ]
    closed, *written = await concurrently(client, [close, *writes])
    assert closed.status_code == 200
    outcomes = {(r.status_code, r.json().get("error")) for r in written}
    assert outcomes <= {(200, None), (409, "revision_conflict"), (409, "state_readonly")}
    won = [data for data, r in zip(datas, written, strict=True) if r.status_code == 200]
    assert len(won) <= 1
    row = snapshot_row(db, started["instance_id"])
    assert row["readonly"] is True
    assert (row["revision"], row["data"]) == ((1, won[0]) if won else (0, {}))
    assert (await put_state(client, headers, row["revision"], {})).json()["error"] == "state_readonly"


async def test_a_write_waiting_on_a_freeze_is_refused_as_readonly(client: Client, db: Any) -> None:
    started, headers = await pomodoro(client)
    with db.transaction():
        db.execute(
            "UPDATE instance_states SET readonly = true WHERE instance_id = %s", [started["instance_id"]]
        )
        # The write reads the last committed snapshot (writable) and then waits for this row lock.
        write = asyncio.create_task(
            concurrently(
                client, [("PUT", "/v1/sdk/state", headers, {"expected_revision": 0, "data": DISPLAY})]
            )
        )
        await asyncio.sleep(0.5)
        assert not write.done()
    [response] = await write
    assert (response.status_code, response.json()["error"]) == (409, "state_readonly")
    row = snapshot_row(db, started["instance_id"])
    assert (row["revision"], row["data"]) == (0, {})


async def test_the_readonly_trigger_is_answered_as_state_readonly_never_500(
    client: Client, db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Without the statement's own NOT readonly guard, the database trigger is the last line.
    monkeypatch.setattr(states_db, "WRITE", states_db.WRITE.replace("AND NOT readonly", ""))
    started, headers = await pomodoro(client)
    with db.transaction():
        db.execute(
            "UPDATE instance_states SET readonly = true WHERE instance_id = %s", [started["instance_id"]]
        )
        write = asyncio.create_task(
            concurrently(
                client, [("PUT", "/v1/sdk/state", headers, {"expected_revision": 0, "data": DISPLAY})]
            )
        )
        await asyncio.sleep(0.5)
        assert not write.done()
    [response] = await write
    assert (response.status_code, response.json()["error"]) == (409, "state_readonly")
    assert snapshot_row(db, started["instance_id"])["data"] == {}


async def assert_frozen(client: Client, db: Any, instance_id: str, headers: dict[str, str]) -> None:
    before = snapshot_row(db, instance_id)
    state = await get_state(client, headers)
    assert state == {"schema_version": 1, "revision": 1, "data": DISPLAY, "readonly": True}
    for revision in (0, 1, 2):
        for data in ({}, {**DISPLAY, "display_state": "focusing"}, TOO_LARGE, {"remaining_seconds": 5}):
            response = await put_state(client, headers, revision, data)
            assert (response.status_code, error_of(response)) == (409, "state_readonly")
    after = snapshot_row(db, instance_id)
    assert (after["revision"], after["data"], after["readonly"], after["updated_at"]) == (
        before["revision"],
        before["data"],
        True,
        before["updated_at"],
    )


async def test_closed_by_the_host_the_snapshot_is_readonly_history(client: Client, db: Any) -> None:
    started, headers = await pomodoro(client)
    assert (await put_state(client, headers, 0, DISPLAY)).status_code == 200
    await client.post(f"/v1/host/instances/{started['instance_id']}/close", headers=HOST)
    await assert_frozen(client, db, started["instance_id"], headers)


async def test_closed_by_an_interrupt_the_snapshot_is_readonly_history(client: Client, db: Any) -> None:
    started, headers = await pomodoro(client)
    assert (await put_state(client, headers, 0, DISPLAY)).status_code == 200
    await client.post("/v1/tool-calls", json=interrupt_body("conv-1"), headers=AGENT)
    await assert_frozen(client, db, started["instance_id"], headers)


async def test_a_write_after_ends_at_settles_the_deadline_and_is_refused(client: Client, db: Any) -> None:
    started, headers = await pomodoro(client)
    assert (await put_state(client, headers, 0, DISPLAY)).status_code == 200
    expire(db, started["operation"]["operation_id"])
    response = await put_state(client, headers, 1, {**DISPLAY, "display_state": "completed"})
    assert (response.status_code, error_of(response)) == (409, "state_readonly")
    operation = db.execute(
        "SELECT state, reason FROM operations WHERE operation_id = %s", [started["operation"]["operation_id"]]
    ).fetchone()
    assert (operation["state"], operation["reason"]) == ("completed", "deadline_reached")
    assert db.execute("SELECT count(*) AS n FROM outbox").fetchone()["n"] == 1
    await assert_frozen(client, db, started["instance_id"], headers)


async def test_a_new_start_gets_a_new_instance_and_a_fresh_snapshot_never_the_old_one(
    client: Client, db: Any
) -> None:
    old, old_headers = await pomodoro(client)
    assert (await put_state(client, old_headers, 0, DISPLAY)).status_code == 200
    await client.post("/v1/tool-calls", json=interrupt_body("conv-1"), headers=AGENT)

    new, new_headers = await pomodoro(client)
    assert new["instance_id"] != old["instance_id"]
    assert await get_state(client, new_headers) == {
        "schema_version": 1,
        "revision": 0,
        "data": {},
        "readonly": False,
    }
    assert (await put_state(client, new_headers, 0, {"display_state": "focusing"})).status_code == 200
    old_state = await get_state(client, old_headers)
    assert (old_state["revision"], old_state["data"], old_state["readonly"]) == (1, DISPLAY, True)
    assert snapshot_row(db, old["instance_id"])["data"] == DISPLAY

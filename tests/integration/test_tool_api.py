"""The Agent Tool API through HTTP: tools, start, interrupt, operations, idempotency."""

from __future__ import annotations

from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from harness.calls import expire, interrupt_body, start_body
from tests.conftest import AGENT, HOST

Client = AsyncTestClient[Any]


async def start(client: Client, conversation_id: str = "conv-1", **kwargs: Any) -> dict[str, Any]:
    response = await client.post("/v1/tool-calls", json=start_body(conversation_id, **kwargs), headers=AGENT)
    assert response.status_code == 202, response.text
    return dict(response.json())


async def interrupt(client: Client, conversation_id: str = "conv-1") -> dict[str, Any]:
    response = await client.post("/v1/tool-calls", json=interrupt_body(conversation_id), headers=AGENT)
    assert response.status_code == 200, response.text
    return dict(response.json())


async def test_tools_lists_every_manifest_tool_with_its_input_schema(client: Client) -> None:
    response = await client.get("/v1/tools", headers=AGENT)
    assert response.status_code == 200
    tools = {tool["name"]: tool for tool in response.json()["tools"]}
    assert {"pomodoro.start", "pomodoro.interrupt", "interact.ask"} <= set(tools)
    assert tools["pomodoro.start"]["kind"] == "operation"
    assert tools["pomodoro.interrupt"]["kind"] == "direct"
    assert tools["pomodoro.start"]["app_scope"] == "pomodoro"
    assert tools["pomodoro.start"]["input_schema"]["properties"]["duration_seconds"]["maximum"] == 14400


async def test_start_opens_instance_sub_session_snapshot_and_focusing_operation(
    client: Client, db: Any
) -> None:
    answer = await start(client, "conv-1", duration_seconds=1500, activity="write report")
    operation = answer["operation"]
    assert answer["status"] == "accepted"
    assert operation["state"] == "focusing"
    assert operation["duration_seconds"] == 1500
    assert operation["activity"] == "write report"
    assert operation["ends_at"] > operation["started_at"]
    instance = db.execute(
        "SELECT * FROM app_instances WHERE instance_id = %s", [answer["instance_id"]]
    ).fetchone()
    assert instance["status"] == "open" and instance["app_scope"] == "pomodoro"
    sub = db.execute("SELECT * FROM sub_sessions WHERE instance_id = %s", [answer["instance_id"]]).fetchone()
    assert str(sub["sub_session_id"]) == answer["sub_session_id"] and sub["status"] == "open"
    state = db.execute(
        "SELECT * FROM instance_states WHERE instance_id = %s", [answer["instance_id"]]
    ).fetchone()
    assert state["revision"] == 0 and state["data"] == {} and not state["readonly"]
    workspace = await client.get("/v1/host/conversations/conv-1/workspace", headers=HOST)
    assert workspace.json()["foreground"] == {"app_scope": "pomodoro", "instance_id": answer["instance_id"]}
    assert workspace.json()["focusing_operation"]["operation_id"] == operation["operation_id"]


async def test_second_start_while_focusing_is_409_naming_the_active_operation(
    client: Client, db: Any
) -> None:
    first = await start(client)
    response = await client.post("/v1/tool-calls", json=start_body("conv-1"), headers=AGENT)
    assert response.status_code == 409
    assert response.json()["error"] == "operation_already_focusing"
    assert response.json()["operation_id"] == first["operation"]["operation_id"]
    assert db.execute("SELECT count(*) AS n FROM operations").fetchone()["n"] == 1


async def test_start_in_other_conversations_is_independent(client: Client) -> None:
    await start(client, "conv-a")
    await start(client, "conv-b")


async def test_same_tool_call_id_and_body_replays_the_same_status_and_body(client: Client, db: Any) -> None:
    body = start_body("conv-1", tool_call_id="same-id")
    first = await client.post("/v1/tool-calls", json=body, headers=AGENT)
    again = await client.post("/v1/tool-calls", json=dict(reversed(list(body.items()))), headers=AGENT)
    assert (again.status_code, again.json()) == (first.status_code, first.json())
    assert again.text == first.text
    assert db.execute("SELECT count(*) AS n FROM operations").fetchone()["n"] == 1


async def test_same_tool_call_id_with_another_body_is_409_idempotency_key_reused(client: Client) -> None:
    await client.post(
        "/v1/tool-calls", json=start_body("conv-1", tool_call_id="k", duration_seconds=60), headers=AGENT
    )
    response = await client.post(
        "/v1/tool-calls", json=start_body("conv-1", tool_call_id="k", duration_seconds=61), headers=AGENT
    )
    assert response.status_code == 409
    assert response.json()["error"] == "idempotency_key_reused"


async def test_a_recorded_409_already_focusing_is_replayed_even_after_the_period_ends(client: Client) -> None:
    await start(client)
    body = start_body("conv-1", tool_call_id="second")
    first = await client.post("/v1/tool-calls", json=body, headers=AGENT)
    await interrupt(client)
    again = await client.post("/v1/tool-calls", json=body, headers=AGENT)
    assert first.status_code == again.status_code == 409
    assert again.json() == first.json()


async def test_a_422_records_nothing_so_the_corrected_call_may_reuse_the_id(client: Client) -> None:
    bad = start_body("conv-1", tool_call_id="fixable", duration_seconds=0)
    assert (await client.post("/v1/tool-calls", json=bad, headers=AGENT)).status_code == 422
    good = start_body("conv-1", tool_call_id="fixable", duration_seconds=60)
    assert (await client.post("/v1/tool-calls", json=good, headers=AGENT)).status_code == 202


async def test_interrupt_interrupts_the_focusing_operation_and_queues_one_result(
    client: Client, db: Any
) -> None:
    started = await start(client)
    receipt = await interrupt(client)
    assert receipt["status"] == "interrupted"
    assert receipt["operation_id"] == started["operation"]["operation_id"]
    operation = (await client.get(f"/v1/operations/{receipt['operation_id']}", headers=AGENT)).json()
    assert (operation["state"], operation["reason"], operation["done"]) == (
        "interrupted",
        "agent_interrupt",
        True,
    )
    assert operation["result"]["state"] == "interrupted"
    assert 0 <= operation["result"]["focused_seconds"] <= 1
    outbox = db.execute("SELECT * FROM outbox").fetchall()
    assert len(outbox) == 1
    assert outbox[0]["tool_call_id"] == started["tool_call_id"]
    assert outbox[0]["payload"]["result"] == operation["result"]
    assert outbox[0]["payload"]["type"] == "tool.result"
    assert outbox[0]["sequence"] == 1


async def test_interrupt_closes_instance_ends_sub_session_freezes_snapshot_restores_interact(
    client: Client, db: Any
) -> None:
    started = await start(client)
    await interrupt(client)
    instance = db.execute(
        "SELECT status FROM app_instances WHERE instance_id = %s", [started["instance_id"]]
    ).fetchone()
    sub = db.execute(
        "SELECT status FROM sub_sessions WHERE instance_id = %s", [started["instance_id"]]
    ).fetchone()
    state = db.execute(
        "SELECT readonly FROM instance_states WHERE instance_id = %s", [started["instance_id"]]
    ).fetchone()
    assert (instance["status"], sub["status"], state["readonly"]) == ("closed", "ended", True)
    workspace = (await client.get("/v1/host/conversations/conv-1/workspace", headers=HOST)).json()
    assert workspace["foreground"] == "interact"
    assert workspace["focusing_operation"] is None
    assert workspace["instances"][0]["status"] == "closed"


async def test_interrupt_again_is_operation_already_final(client: Client) -> None:
    started = await start(client)
    await interrupt(client)
    receipt = await interrupt(client)
    assert receipt["status"] == "operation_already_final"
    assert receipt["final_state"] == "interrupted"
    assert receipt["operation_id"] == started["operation"]["operation_id"]


async def test_interrupt_with_nothing_ever_started_is_no_active_focusing_operation(
    client: Client, db: Any
) -> None:
    receipt = await interrupt(client, "never-seen")
    assert receipt == {"tool_call_id": receipt["tool_call_id"], "status": "no_active_focusing_operation"}
    assert db.execute("SELECT count(*) AS n FROM workspaces").fetchone()["n"] == 0


async def test_interrupt_long_after_the_end_is_no_active_focusing_operation(client: Client, db: Any) -> None:
    started = await start(client)
    await interrupt(client)
    db.execute(
        "UPDATE operations SET started_at = started_at - interval '1 hour', ends_at = ends_at - interval '1 hour',"
        " finalized_at = finalized_at - interval '1 hour' WHERE operation_id = %s",
        [started["operation"]["operation_id"]],
    )
    assert (await interrupt(client))["status"] == "no_active_focusing_operation"


async def test_interrupt_after_ends_at_settles_completed_and_answers_already_final(
    client: Client, db: Any
) -> None:
    started = await start(client, duration_seconds=60)
    expire(db, started["operation"]["operation_id"])
    receipt = await interrupt(client)
    assert receipt["status"] == "operation_already_final"
    assert receipt["final_state"] == "completed"
    row = db.execute("SELECT state, reason, finalized_at >= ends_at AS late FROM operations").fetchone()
    assert (row["state"], row["reason"], row["late"]) == ("completed", "deadline_reached", True)


async def test_interrupt_replay_returns_the_first_receipt_verbatim(client: Client) -> None:
    await start(client)
    body = interrupt_body("conv-1")
    first = await client.post("/v1/tool-calls", json=body, headers=AGENT)
    second = await client.post("/v1/tool-calls", json=body, headers=AGENT)
    assert first.json()["status"] == "interrupted"
    assert second.text == first.text


async def test_reading_an_overdue_focusing_operation_settles_it_completed(client: Client, db: Any) -> None:
    started = await start(client, duration_seconds=60)
    operation_id = started["operation"]["operation_id"]
    expire(db, operation_id, seconds_ago=2)
    operation = (await client.get(f"/v1/operations/{operation_id}", headers=AGENT)).json()
    assert (operation["state"], operation["reason"], operation["done"]) == (
        "completed",
        "deadline_reached",
        True,
    )
    assert operation["result"]["focused_seconds"] == 60
    assert db.execute("SELECT count(*) AS n FROM outbox").fetchone()["n"] == 1
    again = (await client.get(f"/v1/operations/{operation_id}", headers=AGENT)).json()
    assert again == operation


async def test_start_after_an_overdue_period_settles_it_then_opens_a_new_one(client: Client, db: Any) -> None:
    first = await start(client, duration_seconds=60)
    expire(db, first["operation"]["operation_id"])
    await start(client, duration_seconds=60)
    states = [r["state"] for r in db.execute("SELECT state FROM operations ORDER BY started_at").fetchall()]
    assert states == ["completed", "focusing"]
    sequences = [r["sequence"] for r in db.execute("SELECT sequence FROM outbox").fetchall()]
    assert sequences == [1]


@pytest.mark.parametrize("operation_id", ["00000000-0000-0000-0000-000000000000", "not-a-uuid"])
async def test_unknown_operation_is_404(client: Client, operation_id: str) -> None:
    response = await client.get(f"/v1/operations/{operation_id}", headers=AGENT)
    assert response.status_code == 404
    assert response.json()["error"] == "unknown_operation"


async def test_result_sequence_counts_per_conversation(client: Client, db: Any) -> None:
    for _ in range(3):
        await start(client, "conv-s")
        await interrupt(client, "conv-s")
    await start(client, "conv-t")
    await interrupt(client, "conv-t")
    rows = db.execute("SELECT conversation_id, sequence FROM outbox ORDER BY created_at").fetchall()
    assert [(r["conversation_id"], r["sequence"]) for r in rows] == [
        ("conv-s", 1),
        ("conv-s", 2),
        ("conv-s", 3),
        ("conv-t", 1),
    ]


async def test_a_tool_call_answer_carries_the_headers_litestar_gives_every_other_answer(
    client: Client,
) -> None:
    # The tool call's answer is written without Litestar's Response (service.api.tools); the
    # catalogue still is one of Litestar's: both must say the same. (Not in the same order:
    # Litestar keeps the app's headers in a frozenset, so its order varies with the hash seed.)
    answer = await client.post("/v1/tool-calls", json=start_body("conv-headers"), headers=AGENT)
    listed = await client.get("/v1/tools", headers=AGENT)

    def headers(response: Any) -> list[tuple[str, str]]:
        return [(name, value) for name, value in response.headers.multi_items() if name != "content-length"]

    assert answer.status_code == 202
    assert sorted(headers(answer)) == sorted(headers(listed))
    assert len(headers(answer)) == 3
    assert dict(headers(answer)) == {
        "x-content-type-options": "nosniff",
        "cache-control": "no-store",
        "content-type": "application/json",
    }
    assert answer.headers["content-length"] == str(len(answer.content))

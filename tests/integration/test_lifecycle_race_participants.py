"""Leaving the workspace and closing the app end a focusing Pomodoro through the same compare-and-set."""

from __future__ import annotations

from typing import Any

from litestar.testing import AsyncTestClient

from harness.calls import expire, interrupt_body, start_body
from tests.conftest import AGENT, HOST

Client = AsyncTestClient[Any]


async def start(
    client: Client, conversation_id: str = "conv-1", duration_seconds: int = 1500
) -> dict[str, Any]:
    response = await client.post(
        "/v1/tool-calls", json=start_body(conversation_id, duration_seconds=duration_seconds), headers=AGENT
    )
    assert response.status_code == 202, response.text
    return dict(response.json())


async def foreground(client: Client, target: Any, conversation_id: str = "conv-1") -> Any:
    return await client.post(
        f"/v1/host/conversations/{conversation_id}/workspace/foreground",
        json={"target": target},
        headers=HOST,
    )


async def operation(client: Client, started: dict[str, Any]) -> dict[str, Any]:
    response = await client.get(f"/v1/operations/{started['operation']['operation_id']}", headers=AGENT)
    return dict(response.json())


async def test_leaving_to_interact_interrupts_with_user_left_workspace(client: Client, db: Any) -> None:
    started = await start(client)
    response = await foreground(client, "interact")
    assert response.status_code == 200
    assert response.json()["foreground"] == "interact"
    assert response.json()["focusing_operation"] is None
    op = await operation(client, started)
    assert (op["state"], op["reason"]) == ("interrupted", "user_left_workspace")
    assert db.execute("SELECT count(*) AS n FROM outbox").fetchone()["n"] == 1


async def test_switching_to_another_app_interrupts_and_opens_it(client: Client, db: Any) -> None:
    started = await start(client)
    response = await foreground(client, {"app_scope": "whiteboard"})
    assert response.status_code == 200
    workspace = response.json()
    assert workspace["foreground"]["app_scope"] == "whiteboard"
    assert [i["app_scope"] for i in workspace["instances"]] == ["whiteboard", "pomodoro"]
    op = await operation(client, started)
    assert (op["state"], op["reason"]) == ("interrupted", "user_left_workspace")


async def test_leaving_after_ends_at_settles_completed_not_interrupted(client: Client, db: Any) -> None:
    started = await start(client, duration_seconds=60)
    expire(db, started["operation"]["operation_id"])
    await foreground(client, "interact")
    op = await operation(client, started)
    assert (op["state"], op["reason"]) == ("completed", "deadline_reached")


async def test_bringing_pomodoro_to_the_foreground_while_focusing_keeps_it_focusing(client: Client) -> None:
    started = await start(client)
    response = await foreground(client, {"app_scope": "pomodoro"})
    assert response.status_code == 200
    assert response.json()["foreground"]["instance_id"] == started["instance_id"]
    assert (await operation(client, started))["state"] == "focusing"


async def test_pomodoro_target_without_an_open_pomodoro_is_409_app_not_resumable(client: Client) -> None:
    response = await foreground(client, {"app_scope": "pomodoro"})
    assert response.status_code == 409
    assert response.json()["error"] == "app_not_resumable"


async def test_unknown_app_scope_is_404_unknown_app(client: Client) -> None:
    response = await foreground(client, {"app_scope": "calendar"})
    assert response.status_code == 404
    assert response.json()["error"] == "unknown_app"


async def test_close_cancels_with_app_closed_and_restores_interact(client: Client, db: Any) -> None:
    started = await start(client)
    response = await client.post(f"/v1/host/instances/{started['instance_id']}/close", headers=HOST)
    assert response.status_code == 200
    assert response.json() == {
        "instance_id": started["instance_id"],
        "app_scope": "pomodoro",
        "status": "closed",
        "operation": {
            "operation_id": started["operation"]["operation_id"],
            "state": "cancelled",
            "reason": "app_closed",
        },
    }
    workspace = (await client.get("/v1/host/conversations/conv-1/workspace", headers=HOST)).json()
    assert workspace["foreground"] == "interact"
    assert db.execute("SELECT count(*) AS n FROM outbox").fetchone()["n"] == 1


async def test_closing_twice_answers_the_same_and_writes_nothing_more(client: Client, db: Any) -> None:
    started = await start(client)
    first = await client.post(f"/v1/host/instances/{started['instance_id']}/close", headers=HOST)
    second = await client.post(f"/v1/host/instances/{started['instance_id']}/close", headers=HOST)
    assert second.json() == first.json()
    assert db.execute("SELECT count(*) AS n FROM outbox").fetchone()["n"] == 1


async def test_close_after_completion_never_rewrites_completed(client: Client, db: Any) -> None:
    started = await start(client, duration_seconds=60)
    expire(db, started["operation"]["operation_id"])
    assert (await operation(client, started))["state"] == "completed"
    response = await client.post(f"/v1/host/instances/{started['instance_id']}/close", headers=HOST)
    assert response.json()["operation"]["state"] == "completed"
    assert db.execute("SELECT count(*) AS n FROM outbox").fetchone()["n"] == 1


async def test_close_of_an_overdue_operation_settles_completed_first(client: Client, db: Any) -> None:
    started = await start(client, duration_seconds=60)
    expire(db, started["operation"]["operation_id"])
    response = await client.post(f"/v1/host/instances/{started['instance_id']}/close", headers=HOST)
    assert response.json()["operation"]["state"] == "completed"
    assert response.json()["operation"]["reason"] == "deadline_reached"


async def test_close_of_unknown_instance_is_404(client: Client) -> None:
    response = await client.post(
        "/v1/host/instances/00000000-0000-0000-0000-000000000001/close", headers=HOST
    )
    assert response.status_code == 404
    assert response.json()["error"] == "unknown_instance"


async def test_interrupt_after_close_reports_the_cancelled_state(client: Client) -> None:
    started = await start(client)
    await client.post(f"/v1/host/instances/{started['instance_id']}/close", headers=HOST)
    response = await client.post("/v1/tool-calls", json=interrupt_body("conv-1"), headers=AGENT)
    assert response.json()["status"] == "operation_already_final"
    assert response.json()["final_state"] == "cancelled"


async def test_workspace_of_an_unseen_conversation_is_empty_with_interact_in_front(client: Client) -> None:
    response = await client.get("/v1/host/conversations/nobody/workspace", headers=HOST)
    assert response.status_code == 200
    body = response.json()
    assert body["foreground"] == "interact"
    assert body["instances"] == [] and body["focusing_operation"] is None
    assert body["server_time"].endswith("Z")


async def test_host_endpoints_refuse_the_agent_token(client: Client) -> None:
    started = await start(client)
    response = await client.post(f"/v1/host/instances/{started['instance_id']}/close", headers=AGENT)
    assert response.status_code == 401
    assert (await operation(client, started))["state"] == "focusing"

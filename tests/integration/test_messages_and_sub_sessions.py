"""Main-conversation and sub-session messages are kept apart; an ended sub-session never grows."""

from __future__ import annotations

from typing import Any

import pytest
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


async def post(
    client: Client, text: str, role: str = "user", conversation_id: str = "conv-1", **extra: Any
) -> Any:
    return await client.post(
        f"/v1/host/conversations/{conversation_id}/messages",
        json={"role": role, "text": text, **extra},
        headers=HOST,
    )


async def listing(client: Client, conversation_id: str = "conv-1", **params: str) -> list[dict[str, Any]]:
    response = await client.get(
        f"/v1/host/conversations/{conversation_id}/messages", params=params, headers=HOST
    )
    assert response.status_code == 200, response.text
    return list(response.json()["messages"])


async def test_main_conversation_messages_come_back_oldest_first(client: Client) -> None:
    first = await post(client, "focus 25 minutes on writing")
    second = await post(client, "Starting a 25 minute focus period.", role="agent")
    assert first.status_code == second.status_code == 201
    body = first.json()
    assert set(body) == {"message_id", "conversation_id", "sub_session_id", "role", "text", "created_at"}
    assert body["sub_session_id"] is None
    assert [m["text"] for m in await listing(client)] == [
        "focus 25 minutes on writing",
        "Starting a 25 minute focus period.",
    ]


async def test_sub_session_messages_stay_out_of_the_main_conversation(client: Client) -> None:
    started = await start(client)
    sub = started["sub_session_id"]
    assert (await post(client, "how long is left?", sub_session_id=sub)).status_code == 201
    await post(client, "main line")
    assert [m["text"] for m in await listing(client)] == ["main line"]
    in_sub = await listing(client, sub_session_id=sub)
    assert [m["text"] for m in in_sub] == ["how long is left?"]
    assert in_sub[0]["sub_session_id"] == sub


@pytest.mark.parametrize("ending", ["interrupt", "close", "deadline"])
async def test_a_message_into_an_ended_sub_session_is_409_sub_session_ended(
    client: Client, db: Any, ending: str
) -> None:
    started = await start(client, duration_seconds=60)
    if ending == "interrupt":
        await client.post("/v1/tool-calls", json=interrupt_body("conv-1"), headers=AGENT)
    elif ending == "close":
        await client.post(f"/v1/host/instances/{started['instance_id']}/close", headers=HOST)
    else:
        expire(db, started["operation"]["operation_id"])
    response = await post(client, "still there?", sub_session_id=started["sub_session_id"])
    assert response.status_code == 409
    assert response.json()["error"] == "sub_session_ended"
    assert await listing(client, sub_session_id=started["sub_session_id"]) == []


async def test_the_database_refuses_a_message_into_an_ended_sub_session(client: Client, db: Any) -> None:
    import psycopg

    started = await start(client)
    await client.post("/v1/tool-calls", json=interrupt_body("conv-1"), headers=AGENT)
    with pytest.raises(psycopg.errors.CheckViolation):
        db.execute(
            "INSERT INTO messages (message_id, conversation_id, sub_session_id, role, text)"
            " VALUES (gen_random_uuid(), 'conv-1', %s, 'user', 'x')",
            [started["sub_session_id"]],
        )


async def test_an_unknown_or_foreign_sub_session_is_404(client: Client) -> None:
    other = await start(client, "conv-other")
    unknown = await post(client, "x", sub_session_id="00000000-0000-0000-0000-000000000000")
    foreign = await post(client, "x", sub_session_id=other["sub_session_id"])
    assert unknown.status_code == foreign.status_code == 404
    assert foreign.json()["error"] == "unknown_sub_session"
    listed = await client.get(
        "/v1/host/conversations/conv-1/messages",
        params={"sub_session_id": other["sub_session_id"]},
        headers=HOST,
    )
    assert listed.status_code == 404


@pytest.mark.parametrize(
    "body",
    [
        {"role": "system", "text": "x"},
        {"role": "user", "text": ""},
        {"role": "user", "text": "x" * 8001},
        {"role": "user"},
        {"role": "user", "text": "x", "sub_session_id": "nope"},
        {"role": "user", "text": "x", "instance_id": "x"},
    ],
)
async def test_bad_message_bodies_are_422(client: Client, db: Any, body: dict[str, Any]) -> None:
    response = await client.post("/v1/host/conversations/conv-1/messages", json=body, headers=HOST)
    assert response.status_code == 422, response.text
    assert response.json()["error"] == "invalid_request"
    assert db.execute("SELECT count(*) AS n FROM messages").fetchone()["n"] == 0


async def test_resuming_the_same_open_instance_reuses_its_sub_session(client: Client) -> None:
    opened = await client.post(
        "/v1/host/conversations/conv-1/workspace/foreground",
        json={"target": {"app_scope": "whiteboard"}},
        headers=HOST,
    )
    board = opened.json()["foreground"]["instance_id"]
    await client.post(
        "/v1/host/conversations/conv-1/workspace/foreground", json={"target": "interact"}, headers=HOST
    )
    resumed = await client.post(
        "/v1/host/conversations/conv-1/workspace/foreground",
        json={"target": {"app_scope": "whiteboard"}},
        headers=HOST,
    )
    assert resumed.json()["foreground"]["instance_id"] == board
    instances = resumed.json()["instances"]
    assert len(instances) == 1
    assert instances[0]["status"] == "open"


async def test_a_closed_app_opens_as_a_new_instance_with_a_new_sub_session(client: Client) -> None:
    opened = (
        await client.post(
            "/v1/host/conversations/conv-1/workspace/foreground",
            json={"target": {"app_scope": "whiteboard"}},
            headers=HOST,
        )
    ).json()
    first = opened["instances"][0]
    await client.post(f"/v1/host/instances/{first['instance_id']}/close", headers=HOST)
    again = (
        await client.post(
            "/v1/host/conversations/conv-1/workspace/foreground",
            json={"target": {"app_scope": "whiteboard"}},
            headers=HOST,
        )
    ).json()
    newest = again["instances"][0]
    assert newest["instance_id"] != first["instance_id"]
    assert newest["sub_session_id"] != first["sub_session_id"]
    assert [i["status"] for i in again["instances"]] == ["open", "closed"]

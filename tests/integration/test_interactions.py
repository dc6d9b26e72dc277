"""interact.ask: a pending interaction owned by the conversation, decided once."""

from __future__ import annotations

from typing import Any

from litestar.testing import AsyncTestClient

from harness.calls import start_body
from tests.conftest import AGENT, HOST

Client = AsyncTestClient[Any]


def ask_body(
    conversation_id: str = "conv-1", tool_call_id: str = "ask-1", **arguments: Any
) -> dict[str, Any]:
    return {
        "tool_call_id": tool_call_id,
        "conversation_id": conversation_id,
        "tool": "interact.ask",
        "arguments": arguments or {"prompt": "Another round?", "choices": ["yes", "no"]},
    }


async def ask(client: Client, **kwargs: Any) -> dict[str, Any]:
    response = await client.post("/v1/tool-calls", json=ask_body(**kwargs), headers=AGENT)
    assert response.status_code == 202, response.text
    return dict(response.json())


async def answer(client: Client, text: str, tool_call_id: str = "ask-1") -> Any:
    return await client.post(
        f"/v1/host/interactions/{tool_call_id}/answer", json={"answer": text}, headers=HOST
    )


async def test_ask_with_interact_in_front_is_pending_with_no_sub_session(client: Client) -> None:
    answer_body = await ask(client)
    assert answer_body["status"] == "accepted"
    assert answer_body["interaction"] == {
        "tool_call_id": "ask-1",
        "conversation_id": "conv-1",
        "prompt": "Another round?",
        "choices": ["yes", "no"],
        "status": "pending",
        "asked_in_sub_session_id": None,
    }
    workspace = (await client.get("/v1/host/conversations/conv-1/workspace", headers=HOST)).json()
    assert [i["tool_call_id"] for i in workspace["pending_interactions"]] == ["ask-1"]


async def test_ask_remembers_the_sub_session_of_the_app_in_front(client: Client) -> None:
    started = (await client.post("/v1/tool-calls", json=start_body("conv-1"), headers=AGENT)).json()
    asked = await ask(client)
    assert asked["interaction"]["asked_in_sub_session_id"] == started["sub_session_id"]


async def test_answer_decides_once_queues_one_result_and_speaks_in_the_main_conversation(
    client: Client, db: Any
) -> None:
    started = (await client.post("/v1/tool-calls", json=start_body("conv-1"), headers=AGENT)).json()
    await ask(client)
    await client.post(f"/v1/host/instances/{started['instance_id']}/close", headers=HOST)
    workspace = (await client.get("/v1/host/conversations/conv-1/workspace", headers=HOST)).json()
    assert [i["status"] for i in workspace["pending_interactions"]] == ["pending"]  # survives the close

    first = await answer(client, "yes")
    assert first.status_code == 200
    receipt = first.json()
    assert (receipt["tool_call_id"], receipt["status"], receipt["answer"]) == ("ask-1", "answered", "yes")
    again = await answer(client, "no")
    assert again.json() == receipt

    rows = db.execute("SELECT * FROM outbox WHERE tool_call_id = 'ask-1'").fetchall()
    assert len(rows) == 1
    payload = rows[0]["payload"]
    assert payload["tool"] == "interact.ask"
    assert payload["operation_id"] is None
    assert payload["result"] == {"state": "answered", "answer": "yes", "answered_at": receipt["answered_at"]}
    main = (await client.get("/v1/host/conversations/conv-1/messages", headers=HOST)).json()["messages"]
    assert [(m["role"], m["text"], m["sub_session_id"]) for m in main] == [("user", "yes", None)]
    old_sub = (
        await client.get(
            "/v1/host/conversations/conv-1/messages",
            params={"sub_session_id": started["sub_session_id"]},
            headers=HOST,
        )
    ).json()["messages"]
    assert old_sub == []
    workspace = (await client.get("/v1/host/conversations/conv-1/workspace", headers=HOST)).json()
    assert workspace["pending_interactions"] == []


async def test_an_answer_outside_the_choices_is_422_and_decides_nothing(client: Client, db: Any) -> None:
    await ask(client)
    response = await answer(client, "maybe")
    assert response.status_code == 422
    assert response.json()["error"] == "invalid_answer"
    assert db.execute("SELECT status FROM interactions").fetchone()["status"] == "pending"


async def test_free_text_answer_without_choices(client: Client) -> None:
    await ask(client, prompt="What will you work on?")
    assert (await answer(client, "the report")).json()["answer"] == "the report"


async def test_answer_for_an_unknown_interaction_is_404(client: Client) -> None:
    response = await answer(client, "yes", tool_call_id="nope")
    assert response.status_code == 404
    assert response.json()["error"] == "unknown_interaction"


async def test_bad_ask_arguments_are_422(client: Client) -> None:
    for arguments in (
        {"prompt": ""},
        {"prompt": "x", "choices": ["a"] * 11},
        {"prompt": "x", "choices": [""]},
        {"prompt": "x", "to": "y"},
    ):
        response = await client.post("/v1/tool-calls", json=ask_body(**arguments), headers=AGENT)
        assert response.status_code == 422, arguments
        assert response.json()["error"] == "invalid_arguments"


async def test_ask_replay_returns_the_same_answer(client: Client, db: Any) -> None:
    first = await client.post("/v1/tool-calls", json=ask_body(), headers=AGENT)
    second = await client.post("/v1/tool-calls", json=ask_body(), headers=AGENT)
    assert second.text == first.text
    assert db.execute("SELECT count(*) AS n FROM interactions").fetchone()["n"] == 1


async def answer_in(client: Client, text: str, conversation_id: str, tool_call_id: str = "ask-1") -> Any:
    return await client.post(
        f"/v1/host/interactions/{tool_call_id}/answer",
        params={"conversation_id": conversation_id},
        json={"answer": text},
        headers=HOST,
    )


async def test_an_id_asked_in_two_conversations_answered_alone_is_409_and_decides_nothing(
    client: Client, db: Any
) -> None:
    await ask(client, conversation_id="conv-1")
    await ask(client, conversation_id="conv-2")
    response = await answer(client, "yes")
    assert response.status_code == 409
    body = response.json()
    assert body["error"] == "ambiguous_tool_call_id"
    assert "conversation_id" in body["message"]
    statuses = db.execute("SELECT status FROM interactions ORDER BY conversation_id").fetchall()
    assert [row["status"] for row in statuses] == ["pending", "pending"]


async def test_conversation_id_in_the_query_answers_that_conversations_interaction_only(
    client: Client, db: Any
) -> None:
    await ask(client, conversation_id="conv-1")
    await ask(client, conversation_id="conv-2")
    response = await answer_in(client, "no", "conv-2")
    assert response.status_code == 200, response.text
    assert response.json()["answer"] == "no"
    rows = db.execute("SELECT conversation_id, status FROM interactions ORDER BY conversation_id").fetchall()
    assert [(row["conversation_id"], row["status"]) for row in rows] == [
        ("conv-1", "pending"),
        ("conv-2", "answered"),
    ]
    assert (await answer_in(client, "yes", "conv-1")).json()["answer"] == "yes"


async def test_conversation_id_naming_a_conversation_without_that_interaction_is_404(client: Client) -> None:
    await ask(client, conversation_id="conv-1")
    response = await answer_in(client, "yes", "conv-3")
    assert response.status_code == 404
    assert response.json()["error"] == "unknown_interaction"


async def test_an_id_asked_in_one_conversation_needs_no_conversation_id(client: Client) -> None:
    await ask(client, conversation_id="conv-1")
    await ask(client, conversation_id="conv-2", tool_call_id="ask-2")
    assert (await answer(client, "yes")).status_code == 200

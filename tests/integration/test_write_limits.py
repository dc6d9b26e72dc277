"""Write limits per principal: a conversation and a person's session may write only so many
messages (and bytes of text), surface events and instance opens per window, counted in the
database (two replicas share one allowance); past it ``429 too_many_requests`` with
``Retry-After``, and nothing more is written. The flood is the third security review's."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from service.app import create_app
from service.db.pool import open_pool
from service.manifests import Registry
from service.settings import Settings
from service.use_cases.maintenance import prune_projections
from tests.conftest import AGENT, HOST, make_settings
from tests.integration.test_host_sessions import bearer, mint

Client = AsyncTestClient[Any]

# A day's window: a test never straddles two.
DAY = 86400


@pytest.fixture
async def limited(database_url: str, registry: Registry) -> AsyncIterator[tuple[Client, Settings]]:
    """The service with the default limits, in one window for the whole test."""
    settings = make_settings(database_url, write_limit_window_seconds=DAY)
    async with AsyncTestClient(app=create_app(settings, registry, sweeper=False)) as client:
        yield client, settings


def count(db: Any, sql: str, *args: Any) -> int:
    return int(db.execute(sql, args).fetchone()["n"])


def assert_limited(answer: Any) -> None:
    assert answer.status_code == 429, answer.text
    assert answer.json()["error"] == "too_many_requests" and answer.json()["message"]
    assert 1 <= int(answer.headers["retry-after"]) <= DAY


async def test_one_sessions_flood_of_messages_and_surface_events_stops_at_the_limit(
    limited: tuple[Client, Settings], db: Any
) -> None:
    client, settings = limited
    session = bearer(await mint(client, "conv-flood"))
    text = "😀" * 8000  # 32,000 bytes of text
    answers = [
        await client.post(
            "/v1/host/conversations/conv-flood/messages", json={"role": "user", "text": text}, headers=session
        )
        for _ in range(200)
    ]
    allowed = settings.write_limit_message_bytes // len(text.encode())
    assert [a.status_code for a in answers[:allowed]] == [201] * allowed
    for answer in answers[allowed:]:
        assert_limited(answer)
    assert count(db, "SELECT count(*) AS n FROM messages WHERE conversation_id = 'conv-flood'") == allowed

    opened = await client.post(
        "/v1/host/conversations/conv-flood/workspace/foreground",
        json={"target": {"app_scope": "whiteboard"}},
        headers=session,
    )
    assert opened.status_code == 200, opened.text
    instance = opened.json()["foreground"]["instance_id"]
    events = [
        await client.post(
            f"/v1/host/instances/{instance}/surface-events", json={"event": "dimmed"}, headers=session
        )
        for _ in range(200)
    ]
    allowed = settings.write_limit_surface_events
    assert [e.status_code for e in events[:allowed]] == [200] * allowed
    for answer in events[allowed:]:
        assert_limited(answer)
    assert count(db, "SELECT count(*) AS n FROM surface_events WHERE instance_id = %s", instance) == allowed
    # The refused writes rolled back their counts: the counters say what was written.
    row = db.execute(
        "SELECT writes, bytes FROM write_allowances WHERE principal = 'conversation:conv-flood' AND kind = 'message'"
    ).fetchone()
    assert (row["writes"], row["bytes"]) == (32, 32 * 32000)


async def test_a_session_spanning_conversations_has_one_allowance(
    database_url: str, registry: Registry, db: Any
) -> None:
    settings = make_settings(database_url, write_limit_window_seconds=DAY, write_limit_messages=4)
    async with AsyncTestClient(app=create_app(settings, registry, sweeper=False)) as client:
        session = bearer(await mint(client, "conv-s1", "conv-s2"))
        codes = [
            (
                await client.post(
                    f"/v1/host/conversations/conv-s{1 + n % 2}/messages",
                    json={"role": "user", "text": "hi"},
                    headers=session,
                )
            ).status_code
            for n in range(8)
        ]
        # Another writer of conv-s1 (the Host backend) still has the conversation's allowance left.
        backend = await client.post(
            "/v1/host/conversations/conv-s1/messages", json={"role": "user", "text": "hi"}, headers=HOST
        )
    assert codes == [201] * 4 + [429] * 4
    assert backend.status_code == 201


async def test_two_replicas_share_one_allowance(database_url: str, registry: Registry, db: Any) -> None:
    settings = make_settings(database_url, write_limit_window_seconds=DAY, write_limit_messages=5)
    async with (
        AsyncTestClient(app=create_app(settings, registry, sweeper=False)) as one,
        AsyncTestClient(app=create_app(settings, registry, sweeper=False)) as two,
    ):
        session = bearer(await mint(one, "conv-replicas"))
        codes = [
            (
                await replica.post(
                    "/v1/host/conversations/conv-replicas/messages",
                    json={"role": "user", "text": "hi"},
                    headers=session,
                )
            ).status_code
            for _ in range(5)
            for replica in (one, two)
        ]
    assert codes.count(201) == 5 and codes.count(429) == 5
    assert count(db, "SELECT count(*) AS n FROM messages WHERE conversation_id = 'conv-replicas'") == 5


async def test_instance_opens_are_limited_per_conversation(
    database_url: str, registry: Registry, db: Any
) -> None:
    settings = make_settings(database_url, write_limit_window_seconds=DAY, write_limit_instance_opens=3)
    codes = []
    async with AsyncTestClient(app=create_app(settings, registry, sweeper=False)) as client:
        for _ in range(5):
            opened = await client.post(
                "/v1/host/conversations/conv-opens/workspace/foreground",
                json={"target": {"app_scope": "whiteboard"}},
                headers=HOST,
            )
            codes.append(opened.status_code)
            if opened.status_code == 200:
                instance = opened.json()["foreground"]["instance_id"]
                closed = await client.post(f"/v1/host/instances/{instance}/close", headers=HOST)
                assert closed.status_code == 200
            else:
                assert_limited(opened)
    assert codes == [200, 200, 200, 429, 429]
    assert count(db, "SELECT count(*) AS n FROM app_instances WHERE conversation_id = 'conv-opens'") == 3


def ask(conversation_id: str) -> dict[str, Any]:
    return {
        "tool_call_id": f"ask-{uuid.uuid4()}",
        "conversation_id": conversation_id,
        "tool": "interact.ask",
        "arguments": {"prompt": "ok?"},
    }


async def test_pending_interactions_per_conversation_are_capped(
    database_url: str, registry: Registry, db: Any
) -> None:
    settings = make_settings(database_url, interact_pending_per_conversation=3)
    async with AsyncTestClient(app=create_app(settings, registry, sweeper=False)) as client:
        asked = [await client.post("/v1/tool-calls", json=ask("conv-asks"), headers=AGENT) for _ in range(3)]
        assert [a.status_code for a in asked] == [202] * 3
        refused = await client.post("/v1/tool-calls", json=ask("conv-asks"), headers=AGENT)
        assert refused.status_code == 429
        assert refused.json()["error"] == "too_many_requests"
        assert "INTERACT_PENDING_PER_CONVERSATION" in refused.json()["message"]
        # Another conversation is not held back; and once the person answers one, the Agent may ask again.
        assert (await client.post("/v1/tool-calls", json=ask("conv-other"), headers=AGENT)).status_code == 202
        first = asked[0].json()["interaction"]["tool_call_id"]
        answered = await client.post(
            f"/v1/host/interactions/{first}/answer", json={"answer": "yes"}, headers=HOST
        )
        assert answered.status_code == 200, answered.text
        assert (await client.post("/v1/tool-calls", json=ask("conv-asks"), headers=AGENT)).status_code == 202
    assert count(db, "SELECT count(*) AS n FROM interactions WHERE conversation_id = 'conv-asks'") == 4


async def test_maintenance_removes_allowances_whose_window_ended(
    database_url: str, registry: Registry, db: Any
) -> None:
    settings = make_settings(database_url, write_limit_window_seconds=60)
    async with AsyncTestClient(app=create_app(settings, registry, sweeper=False)) as client:
        for conversation in ("conv-old", "conv-now"):
            written = await client.post(
                f"/v1/host/conversations/{conversation}/messages",
                json={"role": "user", "text": "hi"},
                headers=HOST,
            )
            assert written.status_code == 201, written.text
    # The app is gone, and its maintenance loop with it (its rounds prune on their own clock and
    # would race the round this test runs).
    # conv-old's window ended two minutes ago: the row counts for nothing any more.
    db.execute(
        "UPDATE write_allowances SET window_start = window_start - interval '2 minutes'"
        " WHERE principal LIKE '%%conv-old%%'"
    )
    assert count(db, "SELECT count(*) AS n FROM write_allowances") == 2
    pool = await open_pool(settings.psycopg_url, size=1, name="test-maintenance")
    try:
        removed = await prune_projections(pool, settings.write_limit_window_seconds)
    finally:
        await pool.close()
    assert removed >= 1
    kept = db.execute("SELECT principal FROM write_allowances").fetchall()
    assert len(kept) == 1 and "conv-now" in kept[0]["principal"]


async def test_the_agents_own_budget_answers_429_with_retry_after_and_records_nothing(
    database_url: str, registry: Registry, db: Any
) -> None:
    # Unlimited by default; AGENT_TOOL_CALL_LIMIT sets a budget per conversation and window.
    settings = make_settings(database_url, agent_tool_call_limit=2, write_limit_window_seconds=86400)
    app = create_app(settings, registry, sweeper=False)
    conversation = f"conv-budget-{uuid.uuid4().hex[:8]}"

    def call(tool_call_id: str, tool: str) -> dict[str, Any]:
        arguments = {"duration_seconds": 60} if tool == "pomodoro.start" else {}
        return {
            "tool_call_id": tool_call_id,
            "conversation_id": conversation,
            "tool": tool,
            "arguments": arguments,
        }

    async with AsyncTestClient(app=app) as client:
        answers = [
            await client.post("/v1/tool-calls", json=call("b-1", "pomodoro.start"), headers=AGENT),
            await client.post("/v1/tool-calls", json=call("b-2", "pomodoro.interrupt"), headers=AGENT),
            await client.post("/v1/tool-calls", json=call("b-1", "pomodoro.start"), headers=AGENT),  # replay
            await client.post("/v1/tool-calls", json=call("b-3", "pomodoro.start"), headers=AGENT),
        ]
    assert [a.status_code for a in answers] == [202, 200, 202, 429]
    assert answers[2].content == answers[0].content
    over = answers[3]
    assert over.json()["error"] == "too_many_requests" and over.json()["retry_after_seconds"] >= 1
    assert int(over.headers["retry-after"]) == over.json()["retry_after_seconds"]
    recorded = db.execute(
        "SELECT tool_call_id, caller FROM tool_calls WHERE conversation_id = %s ORDER BY tool_call_id",
        (conversation,),
    ).fetchall()
    assert [(r["tool_call_id"], r["caller"]) for r in recorded] == [
        ("b-1", {"kind": "agent"}),
        ("b-2", {"kind": "agent"}),
    ]

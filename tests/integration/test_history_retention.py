"""History retention removes finished history older than the period, in bounded batches, and never
what is live: a focusing operation, a pending interaction, an undelivered outbox row and what they
reference. A replay of an expired answer is refused and never runs the Tool again."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from harness.calls import interrupt_body, start_body
from service.db.pool import Pool, open_pool
from service.use_cases.history_retention import HistoryPruning, prune_history, prune_history_by_conversation
from tests.conftest import AGENT, HOST, OPERATOR

Client = AsyncTestClient[Any]
DAYS = 30
# Pruning "now + 31 days": everything made in the test is older than the period.
LATER = datetime.now(UTC) + timedelta(days=DAYS + 1)
TABLES = (
    "operations",
    "app_instances",
    "sub_sessions",
    "instance_states",
    "messages",
    "surface_events",
    "interactions",
    "capabilities",
)


def counts(db: Any, conversation_id: str) -> dict[str, int]:
    found = {}
    for table in TABLES:
        if table in ("sub_sessions", "instance_states", "surface_events", "capabilities"):
            where = (
                "instance_id IN (SELECT instance_id FROM app_instances WHERE conversation_id = %s)"
                if table != "sub_sessions"
                else "conversation_id = %s"
            )
        else:
            where = "conversation_id = %s"
        found[table] = db.execute(
            f"SELECT count(*) AS n FROM {table} WHERE {where}", [conversation_id]
        ).fetchone()["n"]
    return found


async def finished_and_closed(client: Client, db: Any, conversation_id: str) -> dict[str, Any]:
    """A Pomodoro interrupted, its result delivered, messages and surface events, its app closed."""
    started = await client.post("/v1/tool-calls", json=start_body(conversation_id), headers=AGENT)
    body = started.json()
    instance = body["instance_id"]
    posted = await client.post(
        f"/v1/host/conversations/{conversation_id}/messages",
        json={"role": "user", "text": "in the app", "sub_session_id": body["sub_session_id"]},
        headers=HOST,
    )
    assert posted.status_code == 201, posted.text
    await client.post("/v1/tool-calls", json=interrupt_body(conversation_id), headers=AGENT)
    await client.post(f"/v1/host/instances/{instance}/capability", headers=HOST)
    await client.post(
        f"/v1/host/conversations/{conversation_id}/messages",
        json={"role": "user", "text": "hi"},
        headers=HOST,
    )
    await client.post(f"/v1/host/instances/{instance}/surface-events", json={"event": "dimmed"}, headers=HOST)
    closed = await client.post(f"/v1/host/instances/{instance}/close", headers=HOST)
    assert closed.status_code < 300, closed.text
    ask = f"ask-{conversation_id}"
    asked = await client.post(
        "/v1/tool-calls",
        json={
            "tool_call_id": ask,
            "conversation_id": conversation_id,
            "tool": "interact.ask",
            "arguments": {"prompt": "Another round?", "choices": ["yes", "no"]},
        },
        headers=AGENT,
    )
    assert asked.status_code == 202, asked.text
    answered = await client.post(f"/v1/host/interactions/{ask}/answer", json={"answer": "yes"}, headers=HOST)
    assert answered.status_code < 300, answered.text
    db.execute(
        "UPDATE outbox SET status = 'delivered', delivered_at = now() WHERE conversation_id = %s",
        [conversation_id],
    )
    return dict(started.json()) | {"request": start_body(conversation_id, tool_call_id=body["tool_call_id"])}


async def pruned(
    database_url: str, *, now: datetime = LATER, batch: int = 2, by_conversation: bool = False
) -> dict[str, int] | None:
    pool = await open_pool(database_url, size=2)
    try:
        if by_conversation:
            return await prune_history_by_conversation(pool, DAYS, by="test", batch=batch, now=now)
        return await prune_history(pool, DAYS, by="test", batch=batch, pause=0, now=now)
    finally:
        await pool.close()


@pytest.mark.parametrize("by_conversation", [False, True], ids=["batches", "by conversation"])
async def test_finished_history_older_than_the_period_goes(
    client: Client, db: Any, database_url: str, by_conversation: bool
) -> None:
    """By conversation: what a round does on Citus (prune_conversation, each on its worker)."""
    for conversation in ("old-1", "old-2", "old-3"):
        await finished_and_closed(client, db, conversation)
    assert all(counts(db, "old-1").values())

    # Within the period nothing goes.
    nothing = await pruned(database_url, now=datetime.now(UTC), by_conversation=by_conversation)
    assert nothing is not None and not any(nothing.values())
    assert all(counts(db, "old-1").values())

    done = await pruned(database_url, by_conversation=by_conversation)  # batches of 2: several per kind
    assert done is not None
    assert done["operations"] == 3 and done["instances"] == 3
    for conversation in ("old-1", "old-2", "old-3"):
        assert not any(counts(db, conversation).values()), counts(db, conversation)
    # Delivered outbox rows went with their operations; the workspace (the conversation) stays.
    assert db.execute("SELECT count(*) AS n FROM outbox WHERE operation_id IS NOT NULL").fetchone()["n"] == 0
    assert db.execute("SELECT count(*) AS n FROM workspaces").fetchone()["n"] == 3
    # Every answer is expired, none deleted: each keeps its fingerprint.
    kept = db.execute("SELECT outcome, response::text AS r FROM tool_calls").fetchall()
    assert len(kept) == 9 and {(k["outcome"], k["r"]) for k in kept} == {
        ("tool_call_expired", '{"error":"tool_call_expired"}')
    }
    stats = (await client.get("/v1/ops/stats", headers=OPERATOR)).json()["history"]
    assert stats["retention_days"] == DAYS and stats["reported_by"] == "test"
    assert stats["last_pruned"]["operations"] == 3 and stats["total_pruned"] == sum(done.values())
    assert stats["oldest_operation_at"] is None and stats["oldest_answer_at"] is None


@pytest.mark.parametrize("by_conversation", [False, True], ids=["batches", "by conversation"])
async def test_an_answer_in_a_conversation_never_opened_expires_too(
    client: Client, db: Any, database_url: str, by_conversation: bool
) -> None:
    """An interrupt in a conversation with no workspace is recorded (200
    no_active_focusing_operation) without making one; its answer ages like any other. Found by the
    Citus rig: the round by conversation skipped every conversation without a workspace row."""
    body = interrupt_body("never-opened")
    first = await client.post("/v1/tool-calls", json=body, headers=AGENT)
    assert first.status_code == 200, first.text
    assert db.execute("SELECT count(*) AS n FROM workspaces").fetchone()["n"] == 0
    done = await pruned(database_url, by_conversation=by_conversation)
    assert done is not None and done["tool_call_answers"] == 1
    again = await client.post("/v1/tool-calls", json=body, headers=AGENT)
    assert again.status_code == 410 and again.json()["error"] == "tool_call_expired"


async def test_what_is_live_is_never_removed(client: Client, db: Any, database_url: str) -> None:
    # A focusing Pomodoro.
    focusing = (await client.post("/v1/tool-calls", json=start_body("live-focusing"), headers=AGENT)).json()
    # A finished one whose result is not delivered yet (pending), one whose delivery died.
    for conversation, status in (("live-pending", "pending"), ("live-dead", "dead")):
        await finished_and_closed(client, db, conversation)
        db.execute(
            "UPDATE outbox SET status = %s, delivered_at = NULL WHERE conversation_id = %s",
            [status, conversation],
        )
    # A pending interaction asked in an app's sub-session, the app since closed.
    asked = await client.post("/v1/tool-calls", json=start_body("live-ask"), headers=AGENT)
    await client.post(
        "/v1/tool-calls",
        json={
            "tool_call_id": "ask-live",
            "conversation_id": "live-ask",
            "tool": "interact.ask",
            "arguments": {"prompt": "Another round?", "choices": ["yes", "no"]},
        },
        headers=AGENT,
    )
    await client.post("/v1/tool-calls", json=interrupt_body("live-ask"), headers=AGENT)
    db.execute(
        "UPDATE outbox SET status = 'delivered', delivered_at = now()"
        " WHERE conversation_id = 'live-ask' AND tool_call_id <> 'ask-live'"
    )
    await client.post(f"/v1/host/instances/{asked.json()['instance_id']}/close", headers=HOST)
    # An interaction asked in an app and answered, its answer not delivered yet; the app closed.
    in_app = (await client.post("/v1/tool-calls", json=start_body("live-in-app"), headers=AGENT)).json()
    await client.post(
        "/v1/tool-calls",
        json={
            "tool_call_id": "ask-in-app",
            "conversation_id": "live-in-app",
            "tool": "interact.ask",
            "arguments": {"prompt": "Another round?", "choices": ["yes", "no"]},
        },
        headers=AGENT,
    )
    await client.post("/v1/host/interactions/ask-in-app/answer", json={"answer": "no"}, headers=HOST)
    await client.post("/v1/tool-calls", json=interrupt_body("live-in-app"), headers=AGENT)
    await client.post(f"/v1/host/instances/{in_app['instance_id']}/close", headers=HOST)
    db.execute(
        "UPDATE outbox SET status = 'delivered', delivered_at = now()"
        " WHERE conversation_id = 'live-in-app' AND tool_call_id <> 'ask-in-app'"
    )
    asked_in = db.execute(
        "SELECT asked_in_sub_session_id FROM interactions WHERE tool_call_id = 'ask-in-app'"
    )
    assert asked_in.fetchone()["asked_in_sub_session_id"] is not None
    before = {c: counts(db, c) for c in ("live-focusing", "live-pending", "live-dead", "live-ask")}

    assert await pruned(database_url) is not None

    assert counts(db, "live-focusing") == before["live-focusing"]
    assert counts(db, "live-pending")["operations"] == 1 and counts(db, "live-pending")["app_instances"] == 1
    assert counts(db, "live-dead")["operations"] == 1 and counts(db, "live-dead")["app_instances"] == 1
    assert counts(db, "live-ask")["interactions"] == 1
    assert (
        db.execute("SELECT status FROM interactions WHERE tool_call_id = 'ask-live'").fetchone()["status"]
        == "pending"
    )
    # The two Pomodoro results and the three answers not delivered: kept, with what they reference.
    assert db.execute("SELECT count(*) AS n FROM outbox WHERE status <> 'delivered'").fetchone()["n"] == 5
    assert db.execute("SELECT count(*) AS n FROM interactions").fetchone()["n"] == 4
    assert counts(db, "live-in-app")["app_instances"] == 1 and counts(db, "live-in-app")["sub_sessions"] == 1
    whole = db.execute(
        "SELECT tool_call_id FROM tool_calls WHERE outcome <> 'tool_call_expired' ORDER BY tool_call_id"
    ).fetchall()
    assert {focusing["tool_call_id"], "ask-live"} <= {r["tool_call_id"] for r in whole}


async def test_a_replay_past_retention_is_refused_and_never_runs_the_tool(
    client: Client, db: Any, database_url: str
) -> None:
    first = await finished_and_closed(client, db, "replayed")
    assert await pruned(database_url) is not None
    operations = db.execute("SELECT count(*) AS n FROM operations").fetchone()["n"]

    again = await client.post("/v1/tool-calls", json=first["request"], headers=AGENT)
    assert again.status_code == 410
    assert again.json()["error"] == "tool_call_expired" and again.json()["message"]
    other = dict(first["request"], arguments={"duration_seconds": 60})
    reused = await client.post("/v1/tool-calls", json=other, headers=AGENT)
    assert reused.status_code == 409 and reused.json()["error"] == "idempotency_key_reused"
    assert db.execute("SELECT count(*) AS n FROM operations").fetchone()["n"] == operations
    assert db.execute("SELECT count(*) AS n FROM app_instances").fetchone()["n"] == 0


async def test_replicas_pruning_at_once_remove_each_row_once(
    client: Client, db: Any, database_url: str
) -> None:
    for n in range(6):
        await finished_and_closed(client, db, f"many-{n}")
    pools: list[Pool] = [await open_pool(database_url, size=2) for _ in range(3)]
    try:
        rounds = await asyncio.gather(
            *(
                prune_history(pool, DAYS, by=f"r{i}", batch=1, pause=0, now=LATER)
                for i, pool in enumerate(pools)
            )
        )
        again = await prune_history(pools[0], DAYS, by="r0", batch=1, pause=0, now=LATER)
    finally:
        for pool in pools:
            await pool.close()
    removed = sum(r["operations"] for r in [*rounds, again] if r is not None)
    assert removed == 6
    assert db.execute("SELECT count(*) AS n FROM app_instances").fetchone()["n"] == 0


async def test_the_loop_reports_a_database_error_and_goes_on(database_url: str) -> None:
    pool = await open_pool(database_url, size=1)
    loop = HistoryPruning(pool, DAYS)
    await pool.close()
    loop.failed(OSError("database gone"))  # logged, not raised
    try:
        loop.failed(ValueError("a bug"))
    except ValueError:
        pass
    else:
        raise AssertionError("a bug must end the loop")

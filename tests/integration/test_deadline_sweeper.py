"""The sweeper settles due operations exactly once, in batches, and wakes for new deadlines."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from harness.calls import expire, start_body
from service.db.pool import Pool, open_pool
from service.use_cases.deadlines import DeadlineSweeper
from service.wakeups import Wakeups
from tests.conftest import AGENT

Client = AsyncTestClient[Any]


@pytest.fixture
async def pool(database_url: str) -> AsyncIterator[Pool]:
    pool = await open_pool(database_url, size=4)
    yield pool
    await pool.close()


async def start_many(client: Client, count: int, duration_seconds: int = 60) -> list[dict[str, Any]]:
    answers = []
    for index in range(count):
        response = await client.post(
            "/v1/tool-calls",
            json=start_body(f"conv-{index}", duration_seconds=duration_seconds),
            headers=AGENT,
        )
        assert response.status_code == 202
        answers.append(response.json())
    return answers


async def test_sweep_settles_every_due_operation_completed_once(
    client: Client, db: Any, pool: Pool, database_url: str
) -> None:
    answers = await start_many(client, 7)
    for answer in answers[:5]:
        expire(db, answer["operation"]["operation_id"])
    sweeper = DeadlineSweeper(pool, Wakeups(), batch_size=2)
    settled = []
    while rows := await sweeper.sweep_once():
        settled += rows
    assert len(settled) == 5
    assert {r["state"] for r in settled} == {"completed"}
    assert await sweeper.sweep_once() == []
    counts = db.execute(
        "SELECT state, count(*) AS n FROM operations GROUP BY state ORDER BY state"
    ).fetchall()
    assert [(r["state"], r["n"]) for r in counts] == [("completed", 5), ("focusing", 2)]
    assert db.execute("SELECT count(*) AS n FROM outbox").fetchone()["n"] == 5
    lateness = db.execute("SELECT lateness_ms FROM operations WHERE state = 'completed'").fetchall()
    assert all(r["lateness_ms"] is not None and r["lateness_ms"] >= 0 for r in lateness)


async def test_sweeper_skips_conversations_locked_by_a_request(
    client: Client, db: Any, pool: Pool, database_url: str
) -> None:
    answers = await start_many(client, 2)
    for answer in answers:
        expire(db, answer["operation"]["operation_id"])
    sweeper = DeadlineSweeper(pool, Wakeups())
    async with pool.connection() as conn, conn.transaction():
        await conn.execute("SELECT 1 FROM workspaces WHERE conversation_id = 'conv-0' FOR UPDATE")
        settled = await sweeper.sweep_once()
        assert [r["conversation_id"] for r in settled] == ["conv-1"]
    assert [r["conversation_id"] for r in await sweeper.sweep_once()] == ["conv-0"]


async def test_running_sweeper_settles_at_the_deadline_and_is_woken_by_a_start(
    swept_client: Client, db: Any
) -> None:
    response = await swept_client.post(
        "/v1/tool-calls", json=start_body("conv-w", duration_seconds=1), headers=AGENT
    )
    operation_id = response.json()["operation"]["operation_id"]
    for _ in range(100):
        row = db.execute(
            "SELECT state, lateness_ms FROM operations WHERE operation_id = %s", [operation_id]
        ).fetchone()
        if row["state"] != "focusing":
            break
        await asyncio.sleep(0.05)
    assert row["state"] == "completed"
    assert 0 <= row["lateness_ms"] < 1000
    workspace = db.execute(
        "SELECT foreground_instance_id FROM workspaces WHERE conversation_id = 'conv-w'"
    ).fetchone()
    assert workspace["foreground_instance_id"] is None


async def test_two_sweepers_side_by_side_settle_each_operation_once(
    client: Client, db: Any, database_url: str
) -> None:
    answers = await start_many(client, 40)
    for answer in answers:
        expire(db, answer["operation"]["operation_id"])
    pools = [await open_pool(database_url, size=2) for _ in range(2)]
    try:
        sweepers = [DeadlineSweeper(p, Wakeups(), batch_size=3) for p in pools]

        async def drain(sweeper: DeadlineSweeper) -> int:
            total = 0
            while rows := await sweeper.sweep_once():
                total += len(rows)
            return total

        totals = await asyncio.gather(*(drain(s) for s in sweepers))
    finally:
        for p in pools:
            with contextlib.suppress(Exception):
                await p.close()
    assert sum(totals) == 40
    assert db.execute("SELECT count(*) AS n FROM outbox").fetchone()["n"] == 40
    assert db.execute("SELECT count(DISTINCT tool_call_id) AS n FROM outbox").fetchone()["n"] == 40


def test_sweeper_claim_uses_the_focusing_deadline_index(db: Any) -> None:
    db.execute("SET enable_seqscan = off")
    plan = "\n".join(
        r["QUERY PLAN"]
        for r in db.execute(
            "EXPLAIN SELECT o.operation_id FROM operations o JOIN workspaces w ON w.conversation_id = o.conversation_id"
            " WHERE o.state = 'focusing' AND o.ends_at <= statement_timestamp() ORDER BY o.ends_at LIMIT 200"
            " FOR UPDATE OF w SKIP LOCKED"
        ).fetchall()
    )
    assert "ix_operations_focusing_ends_at" in plan

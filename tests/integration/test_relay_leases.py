"""The claim and outcome statements: head-of-line claims under a lease, outcomes only while holding it."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import psycopg
import pytest
from psycopg.rows import TupleRow

from relay import circuit, claims
from relay.claims import Claim, Outcome
from relay.policy import Verdict
from service.domain.delivery import AGENT_ENDPOINT
from tests.support.outbox import attempt_rows, outbox_rows, queue_across, queue_results

Db = psycopg.Connection[dict[str, Any]]
Conn = psycopg.AsyncConnection[TupleRow]


@pytest.fixture
async def conn(database_url: str) -> AsyncIterator[Conn]:
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as connection:
        yield connection


@pytest.fixture(autouse=True, params=["statements", "per node"])
def claim_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test runs through the relay's statements and through their per-node form (what a
    relay on a Citus worker calls: relay_claim_local, relay_record_local), which on one
    PostgreSQL works on the table itself."""
    if request.param == "per node":
        monkeypatch.setattr(claims, "claim", functools.partial(claims.claim, on_node=True))
        monkeypatch.setattr(
            claims, "record_outcomes", functools.partial(claims.record_outcomes, on_node=True)
        )
    return str(request.param)


def outcome(claim: Claim, verdict: Verdict, delay: float = 0.0) -> Outcome:
    return Outcome(claim, verdict, delay, None, datetime.now(UTC), 12, 204, None, None)


def expire_leases(db: Db) -> None:
    db.execute(
        "UPDATE outbox SET lease_expires_at = now() - interval '1 second' WHERE lease_owner IS NOT NULL"
    )


async def test_only_the_head_of_each_conversation_is_claimed(conn: Conn, db: Db) -> None:
    a = queue_results(db, "conv-a", 3)
    b = queue_results(db, "conv-b", 2)
    claimed = await claims.claim(conn, "relay-x", 10, 30)
    assert {str(c.event_id) for c in claimed} == {a[0].event_id, b[0].event_id}
    assert all(c.attempts == 1 for c in claimed)


async def test_the_next_row_is_claimable_once_its_head_is_delivered(conn: Conn, db: Db) -> None:
    a = queue_results(db, "conv-a", 2)
    (head,) = await claims.claim(conn, "relay-x", 10, 30)
    assert await claims.claim(conn, "relay-x", 10, 30) == []
    await claims.record_outcomes(conn, "relay-x", [outcome(head, "delivered")])
    (second,) = await claims.claim(conn, "relay-x", 10, 30)
    assert str(second.event_id) == a[1].event_id


async def test_a_row_waiting_for_its_retry_holds_back_only_its_conversation(conn: Conn, db: Db) -> None:
    a = queue_results(db, "conv-a", 2)
    (a_head,) = await claims.claim(conn, "relay-x", 10, 30)
    b = queue_results(db, "conv-b", 1)
    await claims.record_outcomes(conn, "relay-x", [outcome(a_head, "retry", delay=60)])
    claimed = await claims.claim(conn, "relay-x", 10, 30)
    assert [str(c.event_id) for c in claimed] == [b[0].event_id]
    row = outbox_rows(db)[a[0].event_id]
    assert row["status"] == "pending" and row["lease_owner"] is None
    assert 0 < (await circuit.look(conn, AGENT_ENDPOINT)).next_due_in <= 60  # type: ignore[operator]


async def test_a_live_lease_is_not_claimable_and_an_expired_one_is_by_any_relay(conn: Conn, db: Db) -> None:
    (queued,) = queue_results(db, "conv-a")
    (first,) = await claims.claim(conn, "relay-x", 10, 30)
    assert await claims.claim(conn, "relay-y", 10, 30) == []
    expire_leases(db)
    (again,) = await claims.claim(conn, "relay-y", 10, 30)
    assert again.event_id == first.event_id
    assert again.attempts == 2
    assert outbox_rows(db)[queued.event_id]["lease_owner"] == "relay-y"


async def test_an_outcome_written_after_losing_the_lease_changes_nothing(conn: Conn, db: Db) -> None:
    (queued,) = queue_results(db, "conv-a")
    (stale,) = await claims.claim(conn, "relay-x", 10, 30)
    expire_leases(db)
    (fresh,) = await claims.claim(conn, "relay-y", 10, 30)
    before = outbox_rows(db)[queued.event_id]

    recorded = await claims.record_outcomes(conn, "relay-x", [outcome(stale, "delivered")])

    assert recorded == {UUID(queued.event_id): "lease_lost"}
    assert outbox_rows(db)[queued.event_id] == before
    await claims.record_outcomes(conn, "relay-y", [outcome(fresh, "delivered")])
    attempts = attempt_rows(db, queued.event_id)
    assert [(a["attempt"], a["relay_id"], a["outcome"]) for a in attempts] == [
        (1, "relay-x", "lease_lost"),
        (2, "relay-y", "delivered"),
    ]
    assert outbox_rows(db)[queued.event_id]["status"] == "delivered"


async def test_the_same_relay_cannot_record_against_a_newer_claim_of_its_own(conn: Conn, db: Db) -> None:
    queue_results(db, "conv-a")
    (old,) = await claims.claim(conn, "relay-x", 10, 30)
    expire_leases(db)
    (new,) = await claims.claim(conn, "relay-x", 10, 30)
    recorded = await claims.record_outcomes(conn, "relay-x", [outcome(old, "dead")])
    assert recorded == {old.event_id: "lease_lost"}
    assert outbox_rows(db)[str(new.event_id)]["status"] == "pending"


async def test_a_claim_looks_for_the_next_due_row_in_its_own_round_trip(
    conn: Conn, db: Db, claim_path: str
) -> None:
    if claim_path == "per node":
        pytest.skip("a relay on a Citus worker looks apart (circuit.look, on_node)")
    (due,) = queue_results(db, "conv-a")
    (later,) = queue_results(db, "conv-b")
    db.execute(
        "UPDATE outbox SET next_attempt_at = now() + interval '5 seconds' WHERE event_id = %s",
        (later.event_id,),
    )
    claimed, seen = await circuit.claim_and_look(conn, "relay-x", 10, 30, endpoint=AGENT_ENDPOINT)
    assert [str(c.event_id) for c in claimed] == [due.event_id]
    # Under the claim's own lease the claimed row is not waiting: the next one due is conv-b's.
    assert seen.next_due_in is not None and 4.0 < seen.next_due_in <= 5.0
    assert (seen.circuit, seen.paused, seen.probe_due) == ("closed", False, False)
    assert seen.wait(poll_interval=1.0) == 1.0 and seen.wait(poll_interval=10.0) == seen.next_due_in
    # An open circuit whose probe is due: nothing claimed, and the look says so.
    await circuit.ensure(conn, AGENT_ENDPOINT)
    db.execute(
        "UPDATE delivery_endpoints SET circuit = 'open', circuit_since = now(),"
        " next_probe_at = now() - interval '1 second' WHERE endpoint = %s",
        (AGENT_ENDPOINT,),
    )
    db.execute("UPDATE outbox SET next_attempt_at = now() WHERE event_id = %s", (later.event_id,))
    claimed, seen = await circuit.claim_and_look(conn, "relay-x", 10, 30, endpoint=AGENT_ENDPOINT)
    assert claimed == [] and seen.circuit == "open" and seen.probe_due


async def test_recording_the_same_outcome_twice_is_harmless(conn: Conn, db: Db) -> None:
    (queued,) = queue_results(db, "conv-a")
    (claimed,) = await claims.claim(conn, "relay-x", 10, 30)
    done = outcome(claimed, "delivered")
    assert await claims.record_outcomes(conn, "relay-x", [done]) == {claimed.event_id: "delivered"}
    # As after a lost commit reply: the repeat recognises its attempt and the lease is gone anyway.
    assert await claims.record_outcomes(conn, "relay-x", [done]) == {}
    assert len(attempt_rows(db, queued.event_id)) == 1
    assert outbox_rows(db)[queued.event_id]["status"] == "delivered"


async def test_attempt_numbers_continue_after_a_requeue_resets_the_count(conn: Conn, db: Db) -> None:
    (queued,) = queue_results(db, "conv-a")
    (claimed,) = await claims.claim(conn, "relay-x", 10, 30)
    await claims.record_outcomes(conn, "relay-x", [outcome(claimed, "dead")])
    # What `ops outbox requeue` does: attempts back to 0, due now, the same event id.
    db.execute("UPDATE outbox SET status = 'pending', attempts = 0, next_attempt_at = now()")
    (again,) = await claims.claim(conn, "relay-x", 10, 30)
    assert again.attempts == 1
    await claims.record_outcomes(conn, "relay-x", [outcome(again, "delivered")])
    assert [a["attempt"] for a in attempt_rows(db, queued.event_id)] == [1, 2]


async def test_release_hands_back_rows_claimed_but_never_sent(conn: Conn, db: Db) -> None:
    queue_results(db, "conv-a")
    queue_results(db, "conv-b")
    kept, dropped = await claims.claim(conn, "relay-x", 10, 30)
    released = await claims.release(conn, "relay-x", keep=[kept.event_id], uncount=1)
    assert released == [dropped.event_id]
    rows = outbox_rows(db)
    assert rows[str(dropped.event_id)]["lease_owner"] is None
    assert rows[str(dropped.event_id)]["attempts"] == 0
    assert rows[str(kept.event_id)]["lease_owner"] == "relay-x"


async def test_relays_claiming_at_once_never_share_a_row(database_url: str, db: Db) -> None:
    queued = queue_across(db, conversations=60, per_conversation=3)

    async def relay(name: str) -> list[UUID]:
        mine: list[UUID] = []
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
            idle = 0
            while idle < 5:
                claimed = await claims.claim(conn, name, 7, 30)
                idle = 0 if claimed else idle + 1
                mine.extend(c.event_id for c in claimed)
                if claimed:
                    await claims.record_outcomes(conn, name, [outcome(c, "delivered") for c in claimed])
                await asyncio.sleep(0)
        return mine

    results = await asyncio.gather(*(relay(f"relay-{n}") for n in range(4)))
    everything = [event_id for mine in results for event_id in mine]
    assert len(everything) == len(set(everything)) == len(queued)


async def test_an_outcomes_text_is_recorded_exactly_whatever_it_holds(conn: Conn, db: Db) -> None:
    (queued,) = queue_results(db, "conv-a")
    (claimed,) = await claims.claim(conn, "relay-x", 10, 30)
    text = 'HTTP 500: {"a": "b,c"} \\ "quoted" \u00e9\u2615\nline two\ttab NULL'
    started = datetime(2026, 12, 3, 7, 0, 0, 123_456, tzinfo=UTC)
    failed = Outcome(claimed, "retry", 1.25, text, started, 7, 500, None, text[:40])
    assert await claims.record_outcomes(conn, "relay-x", [failed]) == {claimed.event_id: "retry"}
    row = outbox_rows(db)[queued.event_id]
    (attempt,) = attempt_rows(db, queued.event_id)
    assert row["last_error"] == text and row["status"] == "pending" and row["lease_owner"] is None
    assert (attempt["started_at"], attempt["duration_ms"], attempt["status_code"]) == (started, 7, 500)
    assert (attempt["response_excerpt"], attempt["error_class"]) == (text[:40], None)


async def test_a_backlog_after_quiet_statistics_finds_each_head_through_its_conversation(
    conn: Conn, db: Db
) -> None:
    # Statistics taken while nothing was pending (the usual state), then a backlog (an outage).
    queue_across(db, conversations=300, per_conversation=1, prefix="quiet")
    db.execute("UPDATE outbox SET status = 'delivered', delivered_at = now()")
    db.execute("ANALYZE outbox")
    queue_across(db, conversations=200, per_conversation=3)
    params = {"relay_id": "relay-x", "limit": 50, "lease_seconds": 30, "busy": [], "endpoint": AGENT_ENDPOINT}
    async with claims.claiming(conn):
        cursor = await conn.execute("EXPLAIN " + claims.CLAIM, params)
    plan = [row[0] for row in await cursor.fetchall()]
    # ix_outbox_due orders the candidates, once; each head is one lookup in its conversation.
    assert sum("ix_outbox_due" in line for line in plan) == 1, "\n".join(plan)
    assert not any("ix_outbox_status_created" in line for line in plan), "\n".join(plan)
    assert any("ix_outbox_pending_conversation_sequence" in line for line in plan), "\n".join(plan)
    claimed = await claims.claim(conn, "relay-x", 1000, 30)
    assert len(claimed) == 200 and {c.sequence for c in claimed} == {1}


async def test_the_claiming_transaction_compiles_no_plan_despite_the_disabled_sort(
    conn: Conn, db: Db
) -> None:
    # The probe's pick sorts; under enable_sort = off its plan costs over 10^10, past jit_above_cost.
    queue_across(db, conversations=20, per_conversation=2)
    params = {"endpoint": AGENT_ENDPOINT, "relay_id": "relay-x", "lease_seconds": 30}
    jit = await (await conn.execute("SELECT pg_jit_available()")).fetchone()
    if jit == (True,):
        async with conn.transaction(force_rollback=True):
            await conn.execute("SET LOCAL enable_sort = off")
            cursor = await conn.execute("EXPLAIN (FORMAT JSON) " + circuit.TAKE_PROBE, params)
            alone = await cursor.fetchone()
        assert alone is not None and "JIT" in alone[0][0], "the hazard this guards against is gone"
    for statement in (circuit.TAKE_PROBE, claims.CLAIM):
        async with conn.transaction(force_rollback=True), claims.claiming(conn):
            cursor = await conn.execute(
                "EXPLAIN (FORMAT JSON) " + statement, {**params, "limit": 10, "busy": []}
            )
            plan = await cursor.fetchone()
        assert plan is not None and "JIT" not in plan[0][0], plan
        assert plan[0][0]["Plan"]["Total Cost"] > 0

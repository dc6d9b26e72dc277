"""The ops API's delivery control: the state, pause and resume, bulk recovery of dead rows, retention."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from litestar.testing import AsyncTestClient
from psycopg.rows import dict_row

from service.db import recovery
from tests.conftest import AGENT, OPERATOR
from tests.integration.test_ops_api import add_outbox_row, get

Client = AsyncTestClient[Any]


async def post(client: Client, path: str, body: Any = None, expected: int = 200) -> Any:
    response = await client.post(path, json=body, headers=OPERATOR)
    assert response.status_code == expected, response.text
    return response.json()


def notifications(db: Any) -> list[str]:
    return [note.channel for note in db.notifies(timeout=0.2, stop_after=5)]


async def test_delivery_runs_with_its_circuit_closed_until_someone_pauses_it(client: Client) -> None:
    state = await get(client, "/v1/ops/delivery")
    assert state == {
        "endpoint": "agent",
        "paused": False,
        "paused_at": None,
        "paused_by": None,
        "reason": None,
        "circuit": "closed",
        "circuit_since": state["circuit_since"],
        "next_probe_at": None,
        "last_probe_at": None,
        "last_error": None,
    }


async def test_pause_is_kept_with_who_and_why_and_a_second_pause_keeps_when(client: Client, db: Any) -> None:
    paused = await post(client, "/v1/ops/delivery/pause", {"reason": "Agent deploy"})
    assert paused["paused"] is True and paused["reason"] == "Agent deploy"
    assert paused["paused_by"] == "ops API"
    again = await post(client, "/v1/ops/delivery/pause", {})
    assert again["paused_at"] == paused["paused_at"] and again["reason"] == "Agent deploy"
    assert await get(client, "/v1/ops/delivery") == again
    row = db.execute("SELECT paused_at IS NOT NULL AS paused FROM delivery_endpoints").fetchone()
    assert row == {"paused": True}


async def test_resume_clears_the_pause_and_wakes_the_relays(client: Client, db: Any) -> None:
    await post(client, "/v1/ops/delivery/pause", {"reason": "maintenance"})
    db.execute("LISTEN lineup_outbox")
    resumed = await post(client, "/v1/ops/delivery/resume")
    assert (resumed["paused"], resumed["paused_at"], resumed["reason"]) == (False, None, None)
    assert "lineup_outbox" in notifications(db)


@pytest.mark.parametrize(
    "body",
    [{"reason": ""}, {"reason": "x" * 501}, {"reason": 5}, {"why": "no"}, [], {"reason": "a\u0000b"}],
    ids=["empty", "too-long", "not-a-string", "unknown-field", "not-an-object", "nul"],
)
async def test_a_bad_pause_body_is_422_and_pauses_nothing(client: Client, body: Any) -> None:
    refused = await post(client, "/v1/ops/delivery/pause", body, expected=422)
    assert refused["error"] == "invalid_request"
    assert (await get(client, "/v1/ops/delivery"))["paused"] is False


async def test_pause_and_resume_need_the_operator(client: Client) -> None:
    for path in ("/v1/ops/delivery/pause", "/v1/ops/delivery/resume", "/v1/ops/outbox/recover"):
        response = await client.post(path, json={}, headers=AGENT)
        assert response.status_code == 401
    assert (await get(client, "/v1/ops/delivery"))["paused"] is False


def dead_rows(db: Any) -> dict[str, str]:
    """Dead rows of several conversations, tools, errors and ages; name -> event_id."""
    return {
        "old-503": add_outbox_row(
            db, "conv-a", 1, "dead", attempts=60, last_error="HTTP 503", age_seconds=7200
        ),
        "a-503": add_outbox_row(
            db, "conv-a", 2, "dead", attempts=60, last_error="HTTP 503: busy", age_seconds=60
        ),
        "a-400": add_outbox_row(db, "conv-a", 3, "dead", attempts=1, last_error="HTTP 400", age_seconds=50),
        "b-refused": add_outbox_row(
            db, "conv-b", 1, "dead", attempts=60, last_error="ConnectError: refused", age_seconds=40
        ),
    }


def statuses(db: Any) -> dict[str, tuple[str, int]]:
    rows = db.execute("SELECT event_id::text AS id, status, attempts FROM outbox").fetchall()
    return {row["id"]: (row["status"], row["attempts"]) for row in rows}


async def test_a_dry_run_counts_the_dead_rows_a_filter_matches_and_changes_nothing(
    client: Client, db: Any
) -> None:
    rows = dead_rows(db)
    before = statuses(db)
    since = (datetime.now(UTC) - timedelta(hours=1)).isoformat()
    cases = [
        ({}, 4),
        ({"since": since}, 3),
        ({"until": since}, 1),
        ({"conversation_id": "conv-a"}, 3),
        ({"last_error_prefix": "HTTP 503"}, 2),
        ({"conversation_id": "conv-a", "last_error_prefix": "HTTP 5", "since": since}, 1),
        ({"tool": "interact.ask"}, 4),
        ({"tool": "pomodoro.start"}, 0),
    ]
    for filters, matched in cases:
        answer = await post(client, "/v1/ops/outbox/recover", {**filters, "dry_run": True})
        assert answer == {"matched": matched, "requeued": 0}, filters
    assert statuses(db) == before and len(rows) == 4


async def test_recover_requeues_exactly_the_matching_dead_rows_by_the_requeue_rule(
    client: Client, db: Any
) -> None:
    rows = dead_rows(db)
    pending = add_outbox_row(db, "conv-c", 1, "pending", attempts=3)
    delivered = add_outbox_row(db, "conv-c", 2, "delivered", attempts=1)
    db.execute("LISTEN lineup_outbox")
    answer = await post(client, "/v1/ops/outbox/recover", {"last_error_prefix": "HTTP 503"})
    assert answer == {"matched": 2, "requeued": 2}
    after = statuses(db)
    assert after[rows["old-503"]] == after[rows["a-503"]] == ("pending", 0)
    assert after[rows["a-400"]] == ("dead", 1) and after[rows["b-refused"]] == ("dead", 60)
    assert after[pending] == ("pending", 3) and after[delivered] == ("delivered", 1)
    row = db.execute("SELECT * FROM outbox WHERE event_id = %s", [rows["a-503"]]).fetchone()
    assert (row["lease_owner"], row["last_error"]) == (None, "HTTP 503: busy")
    assert "lineup_outbox" in notifications(db)
    assert await post(client, "/v1/ops/outbox/recover", {"last_error_prefix": "HTTP 503"}) == {
        "matched": 0,
        "requeued": 0,
    }


async def test_recover_goes_in_batches_and_finishes(db: Any, database_url: str) -> None:
    for sequence in range(1, 8):
        add_outbox_row(db, f"conv-{sequence % 3}", sequence, "dead", attempts=60)
    async with await psycopg.AsyncConnection.connect(
        database_url, autocommit=True, row_factory=dict_row
    ) as conn:
        done = await recovery.recover(conn, recovery.DeadFilter(), batch=2, keep_rows=True)
    assert (done.matched, done.requeued) == (7, 7)
    # Batch by batch in each conversation's order.
    order = [(row["conversation_id"], row["sequence"]) for row in done.rows]
    assert order == sorted(order)
    assert {status for status, _ in statuses(db).values()} == {"pending"}


@pytest.mark.parametrize(
    ("body", "path"),
    [
        ({"since": "2026-12-01T10:00:00"}, "since"),
        ({"since": "yesterday"}, "since"),
        ({"since": "2026-12-02T10:00:00Z", "until": "2026-12-01T10:00:00Z"}, "$"),
        ({"conversation_id": ""}, "conversation_id"),
        ({"dry_run": "yes"}, "dry_run"),
        ({"everything": True}, "everything"),
    ],
)
async def test_a_bad_recover_body_is_422_naming_the_field(client: Client, body: Any, path: str) -> None:
    refused = await post(client, "/v1/ops/outbox/recover", body, expected=422)
    assert refused["error"] == "invalid_request"
    assert path in [detail["path"] for detail in refused["details"]]


async def test_retention_shows_what_the_relays_reported_and_the_oldest_rows(client: Client, db: Any) -> None:
    empty = await get(client, "/v1/ops/retention")
    assert empty["delivered_days"] is None and empty["oldest_delivered_at"] is None
    add_outbox_row(db, "conv-a", 1, "delivered", attempts=1, age_seconds=3600)
    add_outbox_row(db, "conv-a", 2, "delivered", attempts=1, age_seconds=60)
    add_outbox_row(db, "conv-b", 1, "dead", attempts=1, age_seconds=600)
    db.execute(
        "INSERT INTO outbox_retention (delivered_days, dead_days, reported_by, last_pruned_rows)"
        " VALUES (7, 30, 'relay-1', 12)"
    )
    retention = await get(client, "/v1/ops/retention")
    assert (retention["delivered_days"], retention["dead_days"], retention["reported_by"]) == (
        7,
        30,
        "relay-1",
    )
    assert retention["last_pruned_rows"] == 12
    oldest = datetime.fromisoformat(retention["oldest_delivered_at"])
    assert timedelta(minutes=59) < datetime.now(UTC) - oldest < timedelta(minutes=61)
    assert retention["oldest_dead_at"] is not None


async def test_the_overview_carries_the_delivery_state_and_retention(client: Client) -> None:
    await post(client, "/v1/ops/delivery/pause", {"reason": "look"})
    overview = await get(client, "/v1/ops/overview")
    assert overview["delivery"]["paused"] is True and overview["delivery"]["reason"] == "look"
    assert set(overview["retention"]) >= {
        "delivered_days",
        "dead_days",
        "oldest_delivered_at",
        "oldest_dead_at",
    }

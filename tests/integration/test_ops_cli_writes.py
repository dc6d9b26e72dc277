"""``python -m service ops``: requeueing dead rows, recovering them by filter, pausing and resuming
delivery."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from tests.conftest import UNKNOWN_UUID
from tests.integration.test_ops_api import add_attempt, add_outbox_row
from tests.support import ops_cli
from tests.support.ops_cli import outbox_row

ops = pytest.fixture(name="ops")(ops_cli.ops)


def logged(err: str) -> list[dict[str, Any]]:
    """The log lines a command wrote on stderr: its writes log what the ops API's log."""
    return [json.loads(line) for line in err.splitlines() if line.startswith("{")]


def test_requeue_puts_a_dead_row_back_with_the_same_event_id_and_zero_attempts(ops: Any, db: Any) -> None:
    event_id = add_outbox_row(db, "conv-1", 1, "dead", attempts=25, last_error="HTTP 503", age_seconds=600)
    add_attempt(db, event_id, 1, "dead", status_code=400)
    db.execute("LISTEN lineup_outbox")

    code, out, err = ops("outbox", "requeue", event_id)

    assert code == 0
    assert [(line["event"], line["event_id"]) for line in logged(err)] == [("outbox_requeued", event_id)]
    assert f"requeued {event_id}" in out and "1 row(s) requeued" in out
    row = outbox_row(db, event_id)
    assert (row["status"], row["attempts"], row["lease_owner"], row["lease_expires_at"]) == (
        "pending",
        0,
        None,
        None,
    )
    assert db.execute("SELECT %s::timestamptz <= now() AS due", [row["next_attempt_at"]]).fetchone()["due"]
    assert row["last_error"] == "HTTP 503"  # kept until the next attempt replaces it
    assert db.execute("SELECT count(*) AS n FROM outbox").fetchone()["n"] == 1
    assert db.execute("SELECT count(*) AS n FROM outbox_attempts").fetchone()["n"] == 1  # history kept
    assert [n.channel for n in db.notifies(timeout=2, stop_after=1)] == ["lineup_outbox"]


@pytest.mark.parametrize("status", ["pending", "delivered"])
def test_requeue_of_a_row_that_is_not_dead_exits_1_and_changes_nothing(
    ops: Any, db: Any, status: str
) -> None:
    event_id = add_outbox_row(db, "conv-1", 1, status, attempts=3, lease_owner="relay-a")
    before = outbox_row(db, event_id)

    code, out, err = ops("outbox", "requeue", event_id)

    assert (code, out) == (1, "")
    assert (
        err.strip() == f"error: outbox row {event_id} is {status}, not dead: only dead rows can be requeued"
    )
    assert outbox_row(db, event_id) == before


@pytest.mark.parametrize("event_id", [UNKNOWN_UUID, "not-a-uuid"])
def test_requeue_of_an_unknown_event_exits_1(ops: Any, event_id: str) -> None:
    code, out, err = ops("outbox", "requeue", event_id)
    assert (code, out) == (1, "")
    assert err.strip() == f"error: no outbox row with event_id {event_id}"


def test_requeue_all_dead_requeues_every_dead_row_and_nothing_else(ops: Any, db: Any) -> None:
    dead_a = add_outbox_row(db, "conv-a", 1, "dead", attempts=25, age_seconds=30)
    dead_b = add_outbox_row(db, "conv-b", 4, "dead", attempts=1, age_seconds=20)
    pending = add_outbox_row(db, "conv-a", 2, "pending", attempts=2)
    delivered = add_outbox_row(db, "conv-c", 1, "delivered", attempts=1)

    code, out, _ = ops("outbox", "requeue", "--all-dead", "--json")

    assert code == 0
    requeued = json.loads(out)["requeued"]
    assert [row["event_id"] for row in requeued] == [dead_a, dead_b]
    assert all(row["status"] == "pending" and row["attempts"] == 0 for row in requeued)
    assert outbox_row(db, pending)["attempts"] == 2
    assert outbox_row(db, delivered)["status"] == "delivered"
    code, out, err = ops("outbox", "requeue", "--all-dead")
    assert (code, out) == (0, "no dead rows: nothing requeued\n")
    assert [(line["event"], line["matched"]) for line in logged(err)] == [("outbox_recovered", 0)]


def test_requeue_needs_an_event_id_or_all_dead_but_not_both(ops: Any) -> None:
    with pytest.raises(SystemExit) as neither:
        ops("outbox", "requeue")
    with pytest.raises(SystemExit) as both:
        ops("outbox", "requeue", str(uuid.uuid4()), "--all-dead")
    assert neither.value.code == both.value.code == 2


def test_delivery_pause_status_and_resume(ops: Any, db: Any) -> None:
    code, out, _ = ops("delivery", "status")
    assert code == 0 and "delivery      running" in out and "circuit       closed" in out
    assert "not reported yet" in out

    code, out, _ = ops("delivery", "pause", "--reason", "Agent deploy")
    assert code == 0 and out.startswith("delivery paused since ")
    row = db.execute("SELECT paused_by, pause_reason FROM delivery_endpoints").fetchone()
    assert row["paused_by"].startswith("cli:") and row["pause_reason"] == "Agent deploy"
    code, out, _ = ops("delivery", "status", "--json")
    assert json.loads(out)["delivery"]["paused"] is True
    assert "delivery            paused, circuit closed" in ops("stats")[1]
    assert set(json.loads(out)["retention"]) >= {"delivered_days", "oldest_dead_at"}

    db.execute("LISTEN lineup_outbox")
    code, out, _ = ops("delivery", "resume")
    assert (code, out) == (0, "delivery running (circuit closed)\n")
    assert [note.channel for note in db.notifies(timeout=0.5, stop_after=1)] == ["lineup_outbox"]


def test_outbox_recover_with_a_dry_run_then_for_real(ops: Any, db: Any) -> None:
    busy = add_outbox_row(db, "conv-a", 1, "dead", attempts=60, last_error="HTTP 503: busy")
    rejected = add_outbox_row(db, "conv-a", 2, "dead", attempts=1, last_error="HTTP 400")

    code, out, err = ops("outbox", "recover", "--last-error", "HTTP 503", "--dry-run")
    assert (code, out) == (0, "1 dead row(s) match: nothing requeued (dry run)\n")
    assert [(line["event"], line["dry_run"], line["matched"]) for line in logged(err)] == [
        ("outbox_recovered", True, 1)
    ]
    assert outbox_row(db, busy)["status"] == "dead"
    code, out, _ = ops("outbox", "recover", "--last-error", "HTTP 503", "--json")
    assert (code, json.loads(out)) == (0, {"matched": 1, "requeued": 1})
    assert outbox_row(db, busy)["status"] == "pending" and outbox_row(db, rejected)["status"] == "dead"
    assert ops("outbox", "recover", "--conversation", "conv-a", "--since", "2020-01-01T00:00:00Z")[1] == (
        "1 of 1 matching dead row(s) requeued\n"
    )


@pytest.mark.parametrize(
    "args",
    [
        ["--since", "yesterday"],
        ["--since", "2026-12-01T10:00:00"],
        ["--since", "2026-12-02T00:00:00Z", "--until", "2026-12-01T00:00:00Z"],
    ],
)
def test_outbox_recover_refuses_times_it_cannot_read_with_exit_2(ops: Any, args: list[str]) -> None:
    try:
        code = ops("outbox", "recover", *args)[0]
    except SystemExit as exc:
        code = exc.code
    assert code == 2

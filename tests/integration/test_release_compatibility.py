"""Release N+1's schema serves release N: what the previous release calls still answers as it did,
and a service reports ready only against a database that serves its own interface."""

from __future__ import annotations

import json
from typing import Any

from litestar.testing import AsyncTestClient

from service.db import code
from service.http import status_of_kind
from service.manifests import Registry

PREVIOUS_CALL = "SELECT * FROM call_tool(%s, %s, %s, %s, %s, %s, %s)"


def test_the_previous_release_gets_the_status_the_api_gives_each_outcome(db: Any, registry: Registry) -> None:
    statuses = db.execute("SELECT interface_1_statuses() AS s").fetchone()["s"]
    assert statuses == {outcome: status_of_kind(registry.kind_of(outcome)) for outcome in statuses}


def test_the_previous_releases_tool_call_answers_and_replays_as_before(db: Any) -> None:
    arguments = json.dumps({"duration_seconds": 60})
    first = db.execute(
        PREVIOUS_CALL, ("prev-1", "conv-prev", "pomodoro.start", "fp", arguments, 300.0, 1)
    ).fetchone()
    again = db.execute(
        PREVIOUS_CALL, ("prev-1", "conv-prev", "pomodoro.start", "fp", arguments, 300.0, 1)
    ).fetchone()
    reused = db.execute(
        PREVIOUS_CALL, ("prev-1", "conv-prev", "pomodoro.start", "other", arguments, 300.0, 1)
    ).fetchone()
    assert (first["status_code"], first["outcome"], first["replayed"]) == (202, "accepted", False)
    assert (again["status_code"], again["response"], again["replayed"]) == (202, first["response"], True)
    assert (reused["status_code"], reused["outcome"]) == (409, "idempotency_key_reused")
    recorded = db.execute("SELECT status_code FROM tool_calls WHERE tool_call_id = 'prev-1'").fetchone()
    assert recorded["status_code"] == 202


def test_the_previous_release_refuses_a_replay_of_an_expired_answer_and_never_runs_it(db: Any) -> None:
    # During an upgrade the previous release may serve a replay of an answer this release's history
    # retention expired: the Tool is not run again, and the refusal has its status (not NULL).
    arguments = json.dumps({"duration_seconds": 60})
    call = ("prev-old", "conv-prev", "pomodoro.start", "fp", arguments, 300.0, 1)
    db.execute(PREVIOUS_CALL, call)
    stop = ("prev-stop", "conv-prev", "pomodoro.interrupt", "fp", "{}", 300.0, 1)
    assert db.execute(PREVIOUS_CALL, stop).fetchone()["outcome"] == "interrupted"
    db.execute("UPDATE outbox SET status = 'delivered', delivered_at = now()")
    expired = db.execute("SELECT * FROM expire_tool_call_answers(now() + interval '1 day', 100)")
    assert expired.fetchone()["expired"] == 2
    again = db.execute(PREVIOUS_CALL, call).fetchone()
    assert (again["status_code"], again["outcome"], again["replayed"]) == (410, "tool_call_expired", True)
    assert json.loads(again["response"])["error"] == "tool_call_expired"
    operations = db.execute("SELECT count(*) AS n FROM operations WHERE conversation_id = 'conv-prev'")
    assert operations.fetchone()["n"] == 1


def test_an_answer_recorded_by_this_release_carries_the_status_the_previous_one_reads(db: Any) -> None:
    db.execute(
        "SELECT * FROM call_tool_v2('new-1', 'conv-new', 'pomodoro.interrupt', 'fp', '{}', "
        '\'pomodoro_interrupt\', \'{"late_window_seconds": 300, "statuses": {"no_active_focusing_operation": 200}}\')'
    )
    recorded = db.execute("SELECT status_code, response::text FROM tool_calls").fetchone()
    assert recorded["status_code"] == 200


def test_an_answer_of_this_release_records_its_outcome_and_the_status_the_previous_one_reads(db: Any) -> None:
    # This release passes no statuses: the database records the outcome word, and fills the status
    # column the previous release's operators read from the contract's table (compat_status_code).
    db.execute(
        "SELECT * FROM call_tool_v3('new-2', 'conv-new', 'pomodoro.interrupt', 'fp', '{}', "
        "'pomodoro_interrupt', '{\"late_window_seconds\": 300}')"
    )
    recorded = db.execute("SELECT outcome, status_code FROM tool_calls").fetchone()
    assert (recorded["outcome"], recorded["status_code"]) == ("no_active_focusing_operation", 200)


def test_the_status_the_previous_release_reads_is_the_one_the_api_gives_each_outcome(
    db: Any, registry: Registry
) -> None:
    for outcome, kind in registry.kinds.items():
        found = db.execute("SELECT compat_status_code(%s, NULL) AS s", (outcome,)).fetchone()["s"]
        assert (outcome, found) == (outcome, status_of_kind(kind))


def test_an_answer_this_release_expires_carries_the_status_the_previous_one_reads(db: Any) -> None:
    db.execute(PREVIOUS_CALL, ("prev-exp", "conv-prev", "pomodoro.interrupt", "fp", "{}", 300.0, 1))
    assert (
        db.execute("SELECT * FROM expire_tool_call_answers(now() + interval '1 day', 100)").fetchone()[
            "expired"
        ]
        == 1
    )
    recorded = db.execute("SELECT outcome, status_code FROM tool_calls").fetchone()
    assert (recorded["outcome"], recorded["status_code"]) == ("tool_call_expired", 410)


def test_an_answer_the_previous_releases_own_code_records_or_expires_gets_its_outcome(db: Any) -> None:
    # Between migration 0019's commit and the new database code's, the release before still runs
    # its own call_tool_v3 and retention, which name no outcome: the compatibility triggers do.
    db.execute(
        "INSERT INTO tool_calls (tool_call_id, conversation_id, tool, fingerprint, status_code, response)"
        " VALUES ('old-insert', 'conv-prev', 'pomodoro.start', 'fp', 409,"
        ' \'{"error":"operation_already_focusing","message":"busy"}\')'
    )
    recorded = db.execute("SELECT outcome FROM tool_calls WHERE tool_call_id = 'old-insert'").fetchone()
    assert recorded["outcome"] == "operation_already_focusing"
    db.execute(
        'UPDATE tool_calls SET status_code = 410, response = \'{"error":"tool_call_expired"}\''
        " WHERE tool_call_id = 'old-insert'"
    )
    expired = db.execute("SELECT outcome FROM tool_calls WHERE tool_call_id = 'old-insert'").fetchone()
    assert expired["outcome"] == "tool_call_expired"


async def test_ready_at_head(client: AsyncTestClient[Any]) -> None:
    answer = await client.get("/readyz")
    assert answer.status_code == 200


async def test_not_ready_before_migrate(client: AsyncTestClient[Any], db: Any) -> None:
    db.execute("UPDATE alembic_version SET version_num = '0006'")
    answer = await client.get("/readyz")
    assert answer.status_code == 503
    assert "run migrate" in answer.json()["reason"]


async def test_ready_at_a_later_release_that_still_serves_this_one(
    client: AsyncTestClient[Any], db: Any
) -> None:
    db.execute("UPDATE alembic_version SET version_num = 'a_later_release'")
    assert (await client.get("/readyz")).status_code == 200
    db.execute(
        "CREATE OR REPLACE FUNCTION database_interfaces() RETURNS integer[] LANGUAGE sql "
        f"RETURN ARRAY[{code.INTERFACE + 1}]"
    )
    answer = await client.get("/readyz")
    assert answer.status_code == 503
    assert f"no longer serves interface {code.INTERFACE}" in answer.json()["reason"]


def test_the_previous_releases_call_tool_v2_reads_the_operation_a_decision_settled(db: Any) -> None:
    # Interface 2 read one settled operation as five columns; its shim reads them from the effects.
    context = json.dumps(
        {
            "state_schema_version": 1,
            "late_window_seconds": 300,
            "statuses": {"accepted": 202, "interrupted": 200},
        }
    )
    call = "SELECT * FROM call_tool_v2(%s, 'conv-v2', %s, 'fp', %s, %s, %s)"
    started = db.execute(
        call, ("v2-start", "pomodoro.start", '{"duration_seconds": 60}', "pomodoro_start", context)
    ).fetchone()
    assert (started["outcome"], started["settled_operation_id"]) == ("accepted", None)
    assert started["deadline"] is not None
    stopped = db.execute(
        call, ("v2-stop", "pomodoro.interrupt", "{}", "pomodoro_interrupt", context)
    ).fetchone()
    operation = db.execute("SELECT operation_id, state FROM operations").fetchone()
    event = db.execute("SELECT event_id FROM outbox WHERE tool_call_id = 'v2-start'").fetchone()
    assert (stopped["outcome"], stopped["settled_state"], stopped["settled_reason"]) == (
        "interrupted",
        "interrupted",
        "agent_interrupt",
    )
    assert (stopped["settled_operation_id"], stopped["settled_event_id"]) == (
        operation["operation_id"],
        event["event_id"],
    )

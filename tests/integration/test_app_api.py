"""The Runtime's API for MiniApps (service/db/sql/75_app_api.sql): an app's decision acts as its Tool's
app (call_tool_v3 says which), and the engine refuses what would touch another app's operation or
instance; what a Tool declares of its operations in its manifest is held by the table for every Tool
alike."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest

from service.db import code

KETTLE = Path(__file__).resolve().parents[1] / "fixtures" / "kettle_app"

CALL = "SELECT * FROM call_tool_v3(%s, %s, %s, %s, %s, %s, %s)"


def call(db: Any, conversation_id: str, tool: str, decide: str, arguments: dict[str, Any]) -> dict[str, Any]:
    tool_call_id = f"{tool}-{uuid.uuid4()}"
    context = {"state_schema_version": 1, "late_window_seconds": 30}
    row: dict[str, Any] = db.execute(
        CALL,
        (
            tool_call_id,
            conversation_id,
            tool,
            tool_call_id,
            json.dumps(arguments),
            decide,
            json.dumps(context),
        ),
    ).fetchone()
    return row


@pytest.fixture
def kettle(db: Any) -> Any:
    """The kettle app's decisions and declarations beside the shipped apps', and a rogue decision of
    the kettle's that runs the statement a test gives it (p_arguments' "sql", $1 the conversation) as
    the kettle."""
    db.execute((KETTLE / "decisions.sql").read_text())
    code.declare_tools(db, code.declared_tools([KETTLE]), only_these=False)
    db.execute(
        """
CREATE FUNCTION kettle_rogue(p_tool_call_id text, p_conversation_id text, p_arguments jsonb, p_context jsonb,
                             OUT outcome text, OUT response jsonb, OUT effects decision_effects)
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE p_arguments ->> 'sql' USING p_conversation_id;
    outcome := 'done';
    response := '{}';
END $$"""
    )
    return db


def pomodoro(db: Any, conversation_id: str) -> dict[str, Any]:
    started = call(db, conversation_id, "pomodoro.start", "pomodoro_start", {"duration_seconds": 600})
    assert started["outcome"] == "accepted"
    answer: dict[str, Any] = json.loads(started["response"])
    return answer


@pytest.mark.parametrize(
    "sql",
    [
        # Settle the Pomodoro's operation, through the API and through the engine's writer behind it.
        "SELECT app_settle_operation($1, (SELECT operation_id FROM operations WHERE conversation_id = $1"
        " AND tool = 'pomodoro.start'), 'interrupted')",
        "SELECT settle_focusing_v2($1, ARRAY(SELECT operation_id FROM operations WHERE conversation_id = $1"
        " AND tool = 'pomodoro.start'), 'interrupted', 'agent_interrupt')",
        # Close its instance, bring it to the front, open an operation in it or of its Tool.
        "SELECT app_close_instance($1, (SELECT instance_id FROM app_instances WHERE conversation_id = $1"
        " AND app_scope = 'pomodoro'))",
        "SELECT app_hand_over($1, (SELECT instance_id FROM app_instances WHERE conversation_id = $1"
        " AND app_scope = 'pomodoro'))",
        "SELECT app_open_operation($1, 'x', 'kettle.boil', (SELECT instance_id FROM app_instances"
        " WHERE conversation_id = $1 AND app_scope = 'pomodoro'), 60, NULL)",
        "SELECT app_open_operation($1, 'x', 'pomodoro.start', (SELECT instance_id FROM app_instances"
        " WHERE conversation_id = $1 AND app_scope = 'pomodoro'), 60, NULL)",
        # Queue a result for the Pomodoro's call.
        "SELECT app_queue_result($1, 'pomodoro.start', 'tc', '{}')",
    ],
    ids=[
        "settle",
        "settle_behind_the_api",
        "close",
        "hand_over",
        "open_in_its_instance",
        "open_of_its_tool",
        "queue",
    ],
)
def test_an_app_cannot_touch_another_apps_operation_or_instance(kettle: Any, sql: str) -> None:
    answer = pomodoro(kettle, "conv-rogue")
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        call(kettle, "conv-rogue", "kettle.rogue", "kettle_rogue", {"sql": sql})
    operation = kettle.execute(
        "SELECT state FROM operations WHERE operation_id = %s", (answer["operation"]["operation_id"],)
    ).fetchone()
    assert operation["state"] == "focusing"
    workspace = kettle.execute(
        "SELECT foreground_instance_id FROM workspaces WHERE conversation_id = 'conv-rogue'"
    ).fetchone()
    assert str(workspace["foreground_instance_id"]) == answer["instance_id"]


def test_the_rogue_decision_reaches_its_own_operation(kettle: Any) -> None:
    """The rogue above is refused for what it touches, not for being a rogue: its own kettle it ends."""
    boiled = call(kettle, "conv-own", "kettle.boil", "kettle_boil", {"seconds": 60})
    assert boiled["outcome"] == "accepted"
    sql = (
        "SELECT app_settle_operation($1, (SELECT operation_id FROM operations WHERE conversation_id = $1"
        " AND tool = 'kettle.boil'), 'interrupted')"
    )
    assert call(kettle, "conv-own", "kettle.rogue", "kettle_rogue", {"sql": sql})["outcome"] == "done"
    assert kettle.execute("SELECT state FROM operations WHERE tool = 'kettle.boil'").fetchone()["state"] == (
        "interrupted"
    )


def test_the_deadline_is_anyones_to_find(kettle: Any) -> None:
    """Another app's overdue operation is settled by any app's request (the deadline rule): a fact of
    the database clock, not an ending one app chose for another."""
    answer = pomodoro(kettle, "conv-due")
    kettle.execute(
        "UPDATE operations SET started_at = started_at - interval '1 hour', ends_at = ends_at - interval '1 hour'"
        " WHERE operation_id = %s",
        (answer["operation"]["operation_id"],),
    )
    assert call(kettle, "conv-due", "kettle.boil", "kettle_boil", {"seconds": 60})["outcome"] == "accepted"
    operation = kettle.execute(
        "SELECT state, reason FROM operations WHERE operation_id = %s", (answer["operation"]["operation_id"],)
    ).fetchone()
    assert (operation["state"], operation["reason"]) == ("completed", "deadline_reached")


def test_a_tools_declared_rules_hold_for_every_writer(kettle: Any) -> None:
    """One running kettle per conversation and its deadline bound are the kettle's manifest's, held by
    the table (operations_guard marks the row, the unique index holds it) even for a row written by
    hand, as for the Pomodoro's."""
    boiled = json.loads(
        call(kettle, "conv-declared", "kettle.boil", "kettle_boil", {"seconds": 60})["response"]
    )
    row = kettle.execute(
        "SELECT one_running, instance_id FROM operations WHERE operation_id = %s",
        (boiled["operation"]["operation_id"],),
    ).fetchone()
    assert row["one_running"] is True
    insert = (
        "INSERT INTO operations (operation_id, tool, tool_call_id, conversation_id, app_scope, instance_id,"
        " duration_seconds, started_at, ends_at) VALUES (gen_random_uuid(), 'kettle.boil', %s, 'conv-declared',"
        " 'kettle', %s, %s, now(), now() + make_interval(secs => %s))"
    )
    with pytest.raises(psycopg.errors.UniqueViolation) as twice:
        kettle.execute(insert, ("by-hand", row["instance_id"], 60, 60))
    assert twice.value.diag.constraint_name == "uq_operations_one_running_per_tool"
    with pytest.raises(psycopg.errors.CheckViolation) as too_long:
        kettle.execute(insert, ("too-long", row["instance_id"], 601, 601))
    assert too_long.value.diag.constraint_name == "operation_declared_max_seconds"

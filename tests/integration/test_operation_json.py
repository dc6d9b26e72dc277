"""An operation's JSON: the database builds it in one function (``operation_json``, 70_settle.sql),
one view for each SQL site — a Tool's answer, its outcome in the outbox, the Host's event stream;
the REST view Python builds says the same of every key they share."""

from __future__ import annotations

import json
from typing import Any

from service.use_cases.serializers import operation_view

CONTEXT = '{"late_window_seconds": 300, "state_schema_version": 1}'
CALL = "SELECT outcome, response FROM call_tool_v3(%s, 'conv-json', %s, 'fp', %s, %s, %s)"


def _start_and_interrupt(db: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    started = db.execute(
        CALL,
        (
            "json-start",
            "pomodoro.start",
            '{"duration_seconds": 60, "activity": "write"}',
            "pomodoro_start",
            CONTEXT,
        ),
    ).fetchone()
    stopped = db.execute(
        CALL, ("json-stop", "pomodoro.interrupt", "{}", "pomodoro_interrupt", CONTEXT)
    ).fetchone()
    assert (started["outcome"], stopped["outcome"]) == ("accepted", "interrupted")
    return json.loads(started["response"]), json.loads(stopped["response"])


def test_each_sql_site_shows_its_own_view_of_an_operation(db: Any) -> None:
    started, _ = _start_and_interrupt(db)
    assert list(started["operation"]) == [
        "state",
        "ends_at",
        "activity",
        "started_at",
        "operation_id",
        "duration_seconds",
    ]
    result = db.execute("SELECT payload FROM outbox").fetchone()["payload"]["result"]
    assert set(result) == {
        "state",
        "reason",
        "activity",
        "duration_seconds",
        "started_at",
        "ends_at",
        "finalized_at",
        "focused_seconds",
    }
    events = db.execute(
        "SELECT payload FROM projection_events WHERE kind = 'operation' ORDER BY event_seq"
    ).fetchall()
    assert [set(e["payload"]) for e in events] == [
        {
            "operation_id",
            "tool",
            "tool_call_id",
            "instance_id",
            "state",
            "reason",
            "activity",
            "started_at",
            "ends_at",
            "finalized_at",
            "result",
        }
    ] * 2
    assert events[1]["payload"]["result"] == result


def test_the_sql_and_the_rest_views_of_an_operation_agree_on_every_key_they_share(db: Any) -> None:
    _start_and_interrupt(db)
    row = db.execute(
        "SELECT o.*, operation_json(o, 'answer') AS answer, operation_json(o, 'result') AS result_view,"
        " operation_json(o, 'event') AS event FROM operations o"
    ).fetchone()
    views = [row.pop("answer"), row.pop("result_view"), row.pop("event")]
    rest = operation_view(row)
    assert rest["finalized_at"] is not None and rest["result"] is not None
    for built in views:
        shared = [key for key in built if key in rest]
        assert len(shared) >= 5
        assert {key: rest[key] for key in shared} == {key: built[key] for key in shared}
    assert views[1] == row["result"]  # the outcome's result is the 'result' view of the row as it ended

"""The Host's event stream against the rows it shows: after a mixed workload of every writer of
``operations`` and of the foreground (the decisions, the sweeper's settle, an app closed, the Host's
foreground switch as Python writes it, a statement that fails), each operation has exactly one event
per state it was in, in order, the last one its row's ``operation_json(…, 'event')``, and each
foreground change exactly one event, the last one the row's foreground. The events are written by
the tables' guards (``operations_guard``, ``workspaces_guard``, 20_guards.sql): a writer that
bypassed them, or a guard that forgot an event, fails here."""

from __future__ import annotations

import itertools
import json
import uuid
from typing import Any

import psycopg
import pytest

from service.db.workspaces import SET_FOREGROUND

CONTEXT = '{"late_window_seconds": 300, "state_schema_version": 1}'
CALL = "SELECT outcome, response FROM call_tool_v3(%s, %s, %s, 'fp', %s, %s, %s)"


def _call(db: Any, tool_call_id: str, conversation: str, tool: str, arguments: str = "{}") -> dict[str, Any]:
    decide = tool.replace(".", "_")
    row = db.execute(CALL, (tool_call_id, conversation, tool, arguments, decide, CONTEXT)).fetchone()
    return {"outcome": row["outcome"], **json.loads(row["response"])}


def _start(db: Any, tool_call_id: str, conversation: str) -> dict[str, Any]:
    answer = _call(
        db, tool_call_id, conversation, "pomodoro.start", '{"duration_seconds": 60, "activity": "x"}'
    )
    assert answer["outcome"] == "accepted"
    return answer


def _events(db: Any, conversation: str, kind: str) -> list[dict[str, Any]]:
    return [
        r["payload"]
        for r in db.execute(
            "SELECT payload FROM projection_events WHERE conversation_id = %s AND kind = %s ORDER BY event_seq",
            (conversation, kind),
        ).fetchall()
    ]


def _overdue(db: Any, conversation: str) -> None:
    """Moves the conversation's focusing operation two hours back: due, and no state change."""
    db.execute(
        "UPDATE operations SET started_at = started_at - interval '2 hours', ends_at = ends_at - interval '2 hours'"
        " WHERE conversation_id = %s AND state = 'focusing'",
        (conversation,),
    )


def test_the_events_agree_with_the_rows_after_every_writer(db: Any) -> None:
    # The Agent's start and interrupt.
    _start(db, "pc-1", "pc-a")
    assert _call(db, "pc-2", "pc-a", "pomodoro.interrupt")["outcome"] == "interrupted"
    # A start whose deadline passed, settled by the sweeper's batch.
    _start(db, "pc-3", "pc-b")
    _overdue(db, "pc-b")
    assert [r["state"] for r in db.execute("SELECT * FROM settle_due(10)").fetchall()] == ["completed"]
    # A start whose deadline passed, settled by the next start in the conversation.
    _start(db, "pc-4", "pc-b")
    _overdue(db, "pc-b")
    _start(db, "pc-5", "pc-b")
    # The Host switches the foreground to Interact and back (Python's statement), and once to
    # what it already is (no change, no event).
    instance = db.execute(
        "SELECT instance_id FROM operations WHERE tool_call_id = 'pc-5' AND conversation_id = 'pc-b'"
    ).fetchone()["instance_id"]
    db.execute(SET_FOREGROUND, {"conversation_id": "pc-b", "instance_id": None})
    db.execute(SET_FOREGROUND, {"conversation_id": "pc-b", "instance_id": instance})
    db.execute(SET_FOREGROUND, {"conversation_id": "pc-b", "instance_id": instance})
    # The app closed: the operation cancelled, the instance closed.
    with db.transaction():
        db.execute("SELECT lock_workspace('pc-b', false)")
        db.execute(
            "SELECT * FROM settle_focusing_v2('pc-b', ARRAY(SELECT operation_id FROM operations"
            " WHERE conversation_id = 'pc-b' AND state = 'focusing'), 'cancelled', 'app_closed')"
        )
    # A write the guard refuses, and one refused after the guard wrote its event (a foreground
    # that is no instance: the foreign key), leave no event behind.
    with pytest.raises(psycopg.errors.CheckViolation):
        db.execute("UPDATE operations SET state = 'focusing' WHERE conversation_id = 'pc-a'")
    with pytest.raises(psycopg.errors.ForeignKeyViolation):
        db.execute(SET_FOREGROUND, {"conversation_id": "pc-a", "instance_id": uuid.uuid4()})
    # An instance closed in the foreground without an operation.
    _start(db, "pc-6", "pc-c")
    with db.transaction():
        db.execute("SELECT lock_workspace('pc-c', false)")
        db.execute(
            "SELECT close_instances_v2('pc-c', ARRAY(SELECT instance_id FROM app_instances"
            " WHERE conversation_id = 'pc-c'), statement_timestamp())"
        )

    operations = db.execute(
        "SELECT o.conversation_id, o.operation_id::text AS operation_id, o.state,"
        " operation_json(o, 'event') AS event FROM operations o WHERE o.conversation_id LIKE 'pc-%'"
    ).fetchall()
    assert {o["state"] for o in operations} == {"interrupted", "completed", "cancelled", "focusing"}
    for o in operations:
        events = [
            e
            for e in _events(db, o["conversation_id"], "operation")
            if e["operation_id"] == o["operation_id"]
        ]
        states = ["focusing"] + ([o["state"]] if o["state"] != "focusing" else [])
        assert [e["state"] for e in events] == states, o
        assert events[-1] == o["event"]
    for conversation, foregrounds in {
        "pc-a": ["instance", None],
        "pc-b": ["instance", None, "instance", None, "instance", None, "instance", None],
        "pc-c": ["instance", None],
    }.items():
        shown = [e["foreground_instance_id"] for e in _events(db, conversation, "workspace")]
        assert [None if f is None else "instance" for f in shown] == foregrounds, conversation
        row = db.execute(
            "SELECT foreground_instance_id::text AS f FROM workspaces WHERE conversation_id = %s",
            (conversation,),
        ).fetchone()
        assert shown[-1] == row["f"]
        assert all(a != b for a, b in itertools.pairwise(shown)), "an event per change, never one without"


def test_an_operation_event_comes_before_the_foreground_it_brings(db: Any) -> None:
    """The order the stream has always shown: the operation, then the foreground it changed."""
    _start(db, "po-1", "po-a")
    _call(db, "po-2", "po-a", "pomodoro.interrupt")
    kinds = db.execute(
        "SELECT kind, payload ->> 'state' AS state FROM projection_events WHERE conversation_id = 'po-a'"
        " ORDER BY event_seq"
    ).fetchall()
    assert [(k["kind"], k["state"]) for k in kinds] == [
        ("operation", "focusing"),
        ("workspace", None),
        ("operation", "interrupted"),
        ("workspace", None),
    ]

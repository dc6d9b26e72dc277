"""The sweeper's batch (``settle_due``, each statement over every conversation of the batch) leaves
exactly what settling one conversation at a time leaves (``settle_if_overdue``, through
``settle_focusing_v2``, ``close_instances_v2`` and ``queue_outbox``): the same operation row and
result, the instance closed, its sub-session ended, its snapshot frozen, the foreground handed back,
one outbox row under the conversation's next sequence number with the same payload, and the same
stream events in the same order — compared row by row, ids and times aside."""

from __future__ import annotations

import datetime as dt
import json
import re
import uuid
from typing import Any

from service.db.workspaces import SET_FOREGROUND

CONTEXT = '{"late_window_seconds": 300, "state_schema_version": 1}'
CALL = "SELECT outcome FROM call_tool_v3(%s, %s, %s, 'fp', %s, %s, %s)"
START = '{"duration_seconds": 60, "activity": "batch"}'
TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

# Each conversation's rows that an ending touches, in the order they were made.
PICTURED = {
    "operations": "SELECT * FROM operations WHERE conversation_id = %s ORDER BY operation_id",
    "app_instances": "SELECT * FROM app_instances WHERE conversation_id = %s ORDER BY instance_id",
    "sub_sessions": "SELECT * FROM sub_sessions WHERE conversation_id = %s ORDER BY sub_session_id",
    "instance_states": "SELECT * FROM instance_states WHERE conversation_id = %s ORDER BY instance_id",
    "workspaces": "SELECT * FROM workspaces WHERE conversation_id = %s",
    # (Its created_at and next_attempt_at are the column defaults, now(): the transaction's start,
    # which the extended protocol may set a little before the statement's.)
    "outbox": "SELECT event_id, operation_id, tool, tool_call_id, conversation_id, sequence, payload,"
    " status, attempts, lease_owner, lease_expires_at, delivered_at, last_error, traceparent, tracestate"
    " FROM outbox"
    " WHERE conversation_id = %s ORDER BY sequence",
    "projection_events": "SELECT kind, payload FROM projection_events WHERE conversation_id = %s"
    " ORDER BY event_seq",
}
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$")


def _call(db: Any, tool_call_id: str, conversation: str, tool: str, arguments: str = "{}") -> str:
    decide = tool.replace(".", "_")
    row = db.execute(CALL, (tool_call_id, conversation, tool, arguments, decide, CONTEXT)).fetchone()
    return str(row["outcome"])


def _focusing_overdue(
    db: Any, conversation: str, *, foreground_away: bool = False, traced: bool = False
) -> None:
    """An earlier Pomodoro interrupted (a result already queued), then one focusing whose deadline
    passed; with ``foreground_away``, the Host has switched the foreground to Interact meanwhile;
    with ``traced``, the start was made in a trace (its context kept with the operation)."""
    assert _call(db, f"{conversation}-1", conversation, "pomodoro.start", START) == "accepted"
    assert _call(db, f"{conversation}-2", conversation, "pomodoro.interrupt") == "interrupted"
    with db.transaction():
        if traced:
            db.execute("SELECT trace_producer(%s, %s)", (TRACEPARENT, "vendor=1"))
        assert _call(db, f"{conversation}-3", conversation, "pomodoro.start", START) == "accepted"
    if foreground_away:
        db.execute(SET_FOREGROUND, {"conversation_id": conversation, "instance_id": None})
    db.execute(
        "UPDATE operations SET started_at = started_at - interval '2 hours',"
        " ends_at = ends_at - interval '2 hours' WHERE conversation_id = %s AND state = 'focusing'",
        (conversation,),
    )


class _Picture:
    """A conversation's rows with what must differ between two conversations named, not kept: its
    id (``C``), each uuid by the order it first appears, the settling moment (``fin``) apart from
    every other time (``T``), a deadline's lateness (``late``)."""

    def __init__(self, conversation: str, finalized: dt.datetime) -> None:
        self.conversation = conversation
        self.finalized = finalized
        self.ids: dict[str, str] = {}

    def of(self, value: Any, key: str = "") -> Any:
        if isinstance(value, dict):
            return {k: self.of(v, k) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.of(v) for v in value]
        if isinstance(value, uuid.UUID):
            return self.of(str(value))
        if isinstance(value, dt.datetime):
            return "fin" if value == self.finalized else "T"
        if key == "lateness_ms" and isinstance(value, int):
            assert value >= 0
            return "late"
        if key == "event_seq":
            return "seq"
        if isinstance(value, str):
            if _UUID.match(value):
                return self.ids.setdefault(value, f"id{len(self.ids)}")
            if _TIME.match(value):
                return self.of(dt.datetime.fromisoformat(value.replace("Z", "+00:00")))
            return value.replace(self.conversation, "C")
        return value


def _picture(db: Any, conversation: str) -> dict[str, Any]:
    finalized = db.execute(
        "SELECT max(finalized_at) AS at FROM operations WHERE conversation_id = %s", (conversation,)
    ).fetchone()["at"]
    picture = _Picture(conversation, finalized)
    rows = {
        table: [dict(r) for r in db.execute(query, (conversation,)).fetchall()]
        for table, query in PICTURED.items()
    }
    pictured: dict[str, Any] = picture.of(rows)
    return pictured


def _returned(db: Any, query: str, *args: Any) -> list[dict[str, Any]]:
    return [dict(r) for r in db.execute(query, args).fetchall()]


def test_the_batch_leaves_what_settling_one_conversation_at_a_time_leaves(db: Any) -> None:
    pairs = [("one-a", "batch-a", False), ("one-b", "batch-b", True), ("one-c", "batch-c", False)]
    for alone, batched, away in pairs:
        traced = alone == "one-c"
        _focusing_overdue(db, alone, foreground_away=away, traced=traced)
        _focusing_overdue(db, batched, foreground_away=away, traced=traced)
    # A conversation whose period is not due yet: the batch leaves it alone.
    assert _call(db, "later-1", "later", "pomodoro.start", START) == "accepted"
    alone_rows = {alone: _returned(db, "SELECT * FROM settle_if_overdue(%s)", alone) for alone, _, _ in pairs}
    batch_rows = _returned(db, "SELECT * FROM settle_due(10)")
    assert sorted(r["conversation_id"] for r in batch_rows) == ["batch-a", "batch-b", "batch-c"]
    assert _returned(db, "SELECT * FROM settle_due(10)") == []
    for alone, batched, _ in pairs:
        assert _picture(db, batched) == _picture(db, alone)
        (returned,) = [r for r in batch_rows if r["conversation_id"] == batched]
        (one,) = alone_rows[alone]
        assert _Picture(batched, returned["finalized_at"]).of(returned) == _Picture(
            alone, one["finalized_at"]
        ).of(one)
        outbox = db.execute(
            "SELECT event_id, sequence, payload FROM outbox WHERE conversation_id = %s ORDER BY sequence",
            (batched,),
        ).fetchall()
        assert [r["sequence"] for r in outbox] == [1, 2]
        assert outbox[-1]["event_id"] == returned["event_id"]
        assert outbox[-1]["payload"]["event_id"] == str(returned["event_id"])
    # The traced start's context went with its result, both ways (the sweeper said none of its own).
    traces = db.execute(
        "SELECT conversation_id, traceparent, tracestate FROM outbox WHERE sequence = 2"
        " AND conversation_id IN ('one-c', 'batch-c') ORDER BY conversation_id"
    ).fetchall()
    assert [(r["traceparent"], r["tracestate"]) for r in traces] == [(TRACEPARENT, "vendor=1")] * 2
    later = db.execute("SELECT state FROM operations WHERE conversation_id = 'later'").fetchone()
    assert later["state"] == "focusing"
    # The foreground changed after the ending's own event when it was the closed instance; not at
    # all when the Host had already handed it to Interact (its switch is the event before).
    for conversation, last in (
        ("batch-a", ["workspace", "operation"]),
        ("batch-b", ["operation", "workspace"]),
    ):
        kinds = db.execute(
            "SELECT kind FROM projection_events WHERE conversation_id = %s ORDER BY event_seq DESC LIMIT 2",
            (conversation,),
        ).fetchall()
        assert [k["kind"] for k in kinds] == last


def test_a_full_batch_numbers_each_result_after_its_conversations_last(db: Any) -> None:
    conversations = [f"many-{n}" for n in range(12)]
    for conversation in conversations:
        _focusing_overdue(db, conversation)
    settled = _returned(db, "SELECT * FROM settle_due(5)")
    settled += _returned(db, "SELECT * FROM settle_due(100)")
    assert sorted(r["conversation_id"] for r in settled) == sorted(conversations)
    rows = db.execute(
        "SELECT x.conversation_id, x.sequence, x.payload, o.result, w.outbox_sequence"
        " FROM outbox x JOIN operations o USING (operation_id, conversation_id)"
        " JOIN workspaces w USING (conversation_id)"
        " WHERE x.conversation_id LIKE 'many-%%' AND o.state = 'completed'"
    ).fetchall()
    assert len(rows) == len(conversations)
    for row in rows:
        assert row["sequence"] == row["outbox_sequence"] == 2
        assert row["payload"]["sequence"] == 2
        assert row["payload"]["result"] == row["result"]
        assert json.loads(json.dumps(row["result"]))["reason"] == "deadline_reached"

"""The wire shapes of the operators' answers (``/v1/ops/*``, ``ops --json``): one formatter per view,
from the rows of ``service.db.ops_queries`` (UUIDs as strings, times RFC 3339)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any
from uuid import UUID

from service.db.ops_queries import Rows
from service.db.tables import ATTEMPT_OUTCOMES, OPERATION_STATES, OUTBOX_STATUSES
from service.domain.cursors import OutboxCursor
from service.domain.errors import AmbiguousToolCallId
from service.domain.timefmt import rfc3339
from service.telemetry import trace_id_of, trace_url

Json = dict[str, Any]


def jsonable(row: Mapping[str, Any]) -> Json:
    """A row as JSON: UUIDs as strings, times RFC 3339; JSON columns are already Python values."""
    return {key: _value(value) for key, value in row.items()}


def _value(value: Any) -> Any:
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, datetime):
        return rfc3339(value)
    return value


def outbox_row(row: Mapping[str, Any]) -> Json:
    """An outbox row without its payload (a requeued one, a row of a list)."""
    return jsonable(row)


def outbox_page(rows: Rows, limit: int) -> Json:
    """A page of outbox rows; ``next_cursor`` names the last row when more follow (null on the last
    page)."""
    page, more = rows["outbox"][:limit], len(rows["outbox"]) > limit
    last = page[-1] if more else None
    cursor = OutboxCursor(last["created_at"], last["conversation_id"], last["sequence"]) if last else None
    return {"outbox": [outbox_row(row) for row in page], "next_cursor": cursor and cursor.encode()}


def outbox_detail(rows: Rows) -> Json | None:
    """One outbox row with its payload and every delivery attempt; None for an unknown event."""
    if not rows["row"]:
        return None
    return {**jsonable(rows["row"][0]), "delivery_attempts": [jsonable(a) for a in rows["attempts"]]}


def tool_call_list(rows: Rows, minutes: int, statuses: Mapping[str, int]) -> Json:
    return {"minutes": minutes, "tool_calls": [recorded_call(row, statuses) for row in rows["tool_calls"]]}


def recorded_call(row: Mapping[str, Any], statuses: Mapping[str, int]) -> Json:
    """A recorded tool call with the status of its outcome word, as the face that reads it names
    statuses (``service.http.outcome_statuses``), after its ``tool``; none for a word no registered
    Tool answers with any more. The word itself is shown only where the row was read with it (the
    list, not the trace)."""
    fields = jsonable(row)
    outcome = fields.pop("outcome") if "response" in fields else fields["outcome"]
    call: Json = {}
    for key, value in fields.items():
        call[key] = value
        if key == "tool":
            call["status_code"] = statuses.get(outcome)
    return call


def traced_call(row: Mapping[str, Any], statuses: Mapping[str, int], trace_url_template: str | None) -> Json:
    """``recorded_call`` of the trace's answer, with ``trace_id`` (of the W3C ``traceparent``
    recorded with it; None when the call was not traced) and ``trace_url``."""
    fields = dict(row)
    trace_id = trace_id_of(fields.pop("traceparent", None))
    return {
        **recorded_call(fields, statuses),
        "trace_id": trace_id,
        "trace_url": trace_url(trace_url_template, trace_id),
    }


def operation_list(rows: Rows) -> Json:
    return {"operations": [jsonable(row) for row in rows["operations"]]}


def stats_view(rows: Rows) -> Json:
    """Outbox by status and its oldest pending age, operations by state, deadline lateness over
    completed operations, delivery attempts by outcome over the last hour, history retention."""
    box, ops = rows["outbox"][0], rows["operations"][0]
    by_outcome = dict.fromkeys(ATTEMPT_OUTCOMES, 0)
    by_outcome.update({row["outcome"]: row["attempts"] for row in rows["attempts"]})
    return {
        "outbox": {
            "by_status": {status: box[status] for status in OUTBOX_STATUSES},
            "dead": box["dead"],
            "due_now": box["due_now"],
            "oldest_pending_age_seconds": box["oldest_pending_age_seconds"],
        },
        "operations": {
            "by_state": {state: ops[state] for state in OPERATION_STATES},
            "focusing": ops["focusing"],
        },
        "deadline_lateness_ms": {
            "completed": ops["completed"],
            "p50": ops["lateness_p50_ms"],
            "p99": ops["lateness_p99_ms"],
            "max": ops["lateness_max_ms"],
        },
        "attempts_last_hour": {"by_outcome": by_outcome, "total": sum(by_outcome.values())},
        "history": history_view(rows["history"][0]),
        "server_time": rfc3339(box["server_time"]),
    }


def history_view(row: Mapping[str, Any]) -> Json:
    """History retention as the last replica to prune reported it (``retention_days`` None: none
    has yet), and the oldest operation, recorded answer and message kept."""
    view = jsonable(row)
    view["last_pruned"] = view["last_pruned"] or {}
    view["total_pruned"] = view["total_pruned"] or 0
    return view


def trace_view(
    tool_call_id: str, rows: Rows, statuses: Mapping[str, int], trace_url_template: str | None = None
) -> Json | None:
    """What happened to one tool call: its recorded answer (with the id of the trace that recorded
    it, and that trace's address in the operators' tracing UI when ``TRACE_URL_TEMPLATE`` names
    one), its operation(s), and the outbox rows with every delivery attempt. None when nothing at
    all carries that tool_call_id."""
    if not (rows["answer"] or rows["operations"] or rows["outbox"]):
        return None
    parts = ("answer", "operations", "outbox")
    conversations = {row["conversation_id"] for part in parts for row in rows[part]}
    if len(conversations) > 1:
        raise AmbiguousToolCallId("tool call", sorted(conversations))
    attempts: dict[UUID, list[Json]] = {}
    for attempt in rows["attempts"]:
        attempts.setdefault(attempt["event_id"], []).append(
            jsonable({key: value for key, value in attempt.items() if key != "event_id"})
        )
    return {
        "tool_call_id": tool_call_id,
        "tool_call": traced_call(rows["answer"][0], statuses, trace_url_template) if rows["answer"] else None,
        "operations": [jsonable(row) for row in rows["operations"]],
        "outbox": [
            {**jsonable(row), "delivery_attempts": attempts.get(row["event_id"], [])}
            for row in rows["outbox"]
        ],
    }


def delivery_view(row: Mapping[str, Any]) -> Json:
    """The endpoint's pause and circuit; an endpoint no relay has recorded yet is running, its
    circuit closed."""
    state = jsonable(row)
    state["paused"] = bool(state["paused"])
    state["circuit"] = state["circuit"] or "closed"
    return state


def retention_view(rows: Rows) -> Json:
    return jsonable(rows["retention"][0])


def overview_view(rows: Rows) -> Json:
    """``{"stats", "last_hour": {"minutes", "deliveries", "failures", "lateness_ms"}, "delivery",
    "retention"}``. A failure is an attempt that did not deliver (retried or dead)."""
    minutes = [
        {
            "at": rfc3339(row["minute"]),
            "created": row["created"],
            "delivered": row["delivered"],
            "failed": row["retried"] + row["dead"],
            "dead": row["dead"],
        }
        for row in rows["minutes"]
    ]
    return {
        "stats": stats_view(rows),
        "last_hour": {
            "minutes": minutes,
            "deliveries": sum(m["delivered"] for m in minutes),
            "failures": sum(m["failed"] for m in minutes),
            "lateness_ms": dict(rows["lateness"][0]),
        },
        "delivery": delivery_view(rows["delivery"][0]),
        "retention": retention_view(rows),
    }

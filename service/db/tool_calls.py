"""The tool-call statement: one round trip per Agent tool call.

``call_tool_v3(...)`` (service/db/sql/95_tool_calls.sql) runs in the one implicit transaction of its
statement: it replays a recorded answer (or refuses another body under the same id), otherwise runs
the Tool's decision function — which takes the conversation's lock and ends operations only through
``settle_focusing_v2`` — records the answer in ``tool_calls`` and returns it with what the decision did
(its effects: the deadline it opened, the operations it settled, whether the conversation changed
and outbox rows were queued). The answer's JSON text is what is both recorded and sent, so a replay
is byte for byte the first answer.

When the process traces (``service.telemetry.TRACING``), the statement is one database client span
(``SELECT call_tool_v3``) after the database conventions — ``db.system.name``, ``db.query.summary``,
``db.query.text`` (placeholders only), ``db.namespace``, ``server.address``/``server.port``, and on
a failed statement ``db.response.status_code`` and ``error.type`` (its SQLSTATE) — with what the
decision answered (``lineup.outcome``, ``lineup.replayed``). What the function does inside is one
statement to the service: no span per query of it. Without traces, one attribute test; under a
span its sampler dropped, no span either (``_sampled``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple

import msgspec
from opentelemetry.trace import SpanContext, SpanKind, StatusCode, get_current_span
from psycopg import AsyncConnection, AsyncRawCursor, Error
from psycopg.rows import DictRow, tuple_row
from psycopg.types.json import set_json_loads

from service.telemetry import TRACING, tracer

Conn = AsyncConnection[DictRow]


class CallResult(NamedTuple):
    """The statement's row, made from its tuple at once (a frozen dataclass would set each field
    through ``object.__setattr__``)."""

    outcome: str
    response: str
    replayed: bool
    deadline: datetime | None  # the earliest of the operations it opened
    settled: list[dict[str, Any]] | None  # the operations it ended (settled_operation, as JSON)
    changed: bool  # it opened or closed something in the conversation, or settled or queued
    queued: bool  # it queued outbox rows (its settled operations' included)


_COLUMNS = CallResult._fields

# The result's columns are named in the statement, in CallResult's order: a column a later schema
# adds breaks nothing, and each row is a plain tuple (no per-row dict, no column-name lookups).
# Postgres' own placeholders ($1…) as bytes, run by a raw cursor: psycopg neither encodes the query
# nor finds and checks its %s placeholders per call.
CALL_TOOL = f"SELECT {', '.join(_COLUMNS)} FROM call_tool_v3($1, $2, $3, $4, $5, $6, $7)".encode()

#: The statement's span: its name is its summary (the database conventions' low-cardinality name).
SUMMARY = "SELECT call_tool_v3"
_SPAN_ATTRIBUTES = {
    "db.system.name": "postgresql",
    "db.query.summary": SUMMARY,
    "db.operation.name": "SELECT",
    "db.stored_procedure.name": "call_tool_v3",
    "db.query.text": CALL_TOOL.decode(),
}


def _cursor(conn: Conn) -> AsyncRawCursor[tuple[Any, ...]]:
    """The connection's cursor for tool calls, made on its first call and kept on the connection
    (a new cursor builds its adapters and transformer each time; a pooled connection runs one
    statement at a time, and ``execute`` starts the cursor afresh). The settled operations' JSON,
    as the database wrote it, is decoded by msgspec (psycopg's default is ``json.loads``)."""
    cursor: AsyncRawCursor[tuple[Any, ...]] | None = getattr(conn, "_lineup_tool_call_cursor", None)
    if cursor is None or cursor.closed:
        cursor = AsyncRawCursor(conn, row_factory=tuple_row)
        set_json_loads(msgspec.json.decode, cursor)
        conn._lineup_tool_call_cursor = cursor  # type: ignore[attr-defined]
    return cursor


async def call(
    conn: Conn,
    *,
    tool_call_id: str,
    conversation_id: str,
    tool: str,
    fingerprint: str,
    arguments: str,
    decide: str,
    context: str,
) -> CallResult:
    """Run one tool call on an autocommit connection: the statement is its own transaction."""
    if TRACING.on and _sampled(get_current_span().get_span_context()):
        return await _traced(
            conn, (tool_call_id, conversation_id, tool, fingerprint, arguments, decide, context), tool
        )
    cursor = _cursor(conn)
    await cursor.execute(
        CALL_TOOL,
        (tool_call_id, conversation_id, tool, fingerprint, arguments, decide, context),
        prepare=True,
    )
    row: Any = await cursor.fetchone()
    assert row is not None
    return CallResult._make(row)


def _sampled(parent: SpanContext) -> bool:
    """Whether the statement's span may be sampled: not under a span its sampler dropped (every
    sampler the SDK ships decides a child as its parent was decided — by the parent's flag, or by
    the trace id they share — so such a span would be dropped too, at the cost of making it)."""
    return not parent.is_valid or parent.trace_flags.sampled


async def _traced(conn: Conn, params: tuple[str, ...], tool: str) -> CallResult:
    """``call`` inside its database client span (what only a recorded span shows is read only
    when it records: most calls are not sampled at a low sampling ratio)."""
    with tracer().start_as_current_span(
        SUMMARY,
        kind=SpanKind.CLIENT,
        attributes=_SPAN_ATTRIBUTES,
        record_exception=False,  # its message may carry the call's data; the SQLSTATE is the error
        set_status_on_exception=False,
    ) as span:
        recording = span.is_recording()
        if recording:
            info = conn.info
            span.set_attributes(
                {
                    "db.namespace": info.dbname,
                    "server.address": info.host,
                    "server.port": info.port,
                    "lineup.tool": tool,
                    "lineup.tool_call_id": params[0],
                }
            )
        try:
            cursor = _cursor(conn)
            await cursor.execute(CALL_TOOL, params, prepare=True)
            row: Any = await cursor.fetchone()
        except Error as failed:
            if recording:
                code = failed.sqlstate or type(failed).__name__
                if failed.sqlstate:
                    span.set_attribute("db.response.status_code", failed.sqlstate)
                span.set_attribute("error.type", code)
                span.set_status(StatusCode.ERROR, code)
            raise
        assert row is not None
        result = CallResult._make(row)
        if recording:
            span.set_attribute("lineup.outcome", result.outcome)
            span.set_attribute("lineup.replayed", result.replayed)
        return result

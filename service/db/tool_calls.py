"""The tool-call statement: one round trip per Agent tool call.

``call_tool(...)`` (a SQL function, migration 0005) runs in the one implicit transaction of its
statement: it replays a recorded answer (or refuses another body under the same id), otherwise
takes the conversation's workspace lock, decides through the tool's function — ``pomodoro_start``,
``pomodoro_interrupt``, ``interact_ask``, which end operations only through ``settle_focusing`` —
records the answer in ``tool_calls`` and returns it. The answer's JSON text is what is both
recorded and sent, so a replay is byte for byte the first answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from psycopg import AsyncConnection
from psycopg.rows import DictRow, tuple_row

Conn = AsyncConnection[DictRow]

CALL_TOOL = "SELECT * FROM call_tool(%s, %s, %s, %s, %s, %s, %s)"


@dataclass(frozen=True, slots=True)
class CallResult:
    status_code: int
    response: str
    outcome: str
    replayed: bool
    deadline: datetime | None
    settled_operation_id: UUID | None
    settled_state: str | None
    settled_reason: str | None
    settled_lateness_ms: int | None
    settled_event_id: UUID | None


async def call(
    conn: Conn,
    *,
    tool_call_id: str,
    conversation_id: str,
    tool: str,
    fingerprint: str,
    arguments: str,
    late_window_seconds: float,
    state_schema_version: int,
) -> CallResult:
    """Run one tool call on an autocommit connection: the statement is its own transaction."""
    cursor = conn.cursor(row_factory=tuple_row)
    await cursor.execute(
        CALL_TOOL,
        (
            tool_call_id,
            conversation_id,
            tool,
            fingerprint,
            arguments,
            late_window_seconds,
            state_schema_version,
        ),
        prepare=True,
    )
    row = await cursor.fetchone()
    assert row is not None
    return CallResult(*row)

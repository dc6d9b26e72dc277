"""The tool-call statement: one round trip per Agent tool call.

``call_tool_v3(...)`` (service/db/sql/95_tool_calls.sql) runs in the one implicit transaction of its
statement: it replays a recorded answer (or refuses another body under the same id), otherwise runs
the Tool's decision function — which takes the conversation's lock and ends operations only through
``settle_focusing`` — records the answer in ``tool_calls`` and returns it with what the decision did
(its effects: the deadline it opened, the operations it settled, whether the conversation changed
and outbox rows were queued). The answer's JSON text is what is both recorded and sent, so a replay
is byte for byte the first answer.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import DictRow

Conn = AsyncConnection[DictRow]

CALL_TOOL = """
SELECT * FROM call_tool_v3(
    %(tool_call_id)s, %(conversation_id)s, %(tool)s, %(fingerprint)s, %(arguments)s, %(decide)s,
    %(context)s)
"""


@dataclass(frozen=True, slots=True)
class CallResult:
    outcome: str
    response: str
    replayed: bool
    deadline: datetime | None  # the earliest of the operations it opened
    settled: list[dict[str, Any]] | None  # the operations it ended (settled_operation, as JSON)
    changed: bool  # it opened or closed something in the conversation, or settled or queued
    queued: bool  # it queued outbox rows (its settled operations' included)

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> CallResult:
        """By column name: a column a later schema adds breaks nothing."""
        return cls(*map(row.__getitem__, _COLUMNS))


_COLUMNS = tuple(field.name for field in fields(CallResult))


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
    cursor = await conn.execute(
        CALL_TOOL,
        {
            "tool_call_id": tool_call_id,
            "conversation_id": conversation_id,
            "tool": tool,
            "fingerprint": fingerprint,
            "arguments": arguments,
            "decide": decide,
            "context": context,
        },
        prepare=True,
    )
    row = await cursor.fetchone()
    assert row is not None
    return CallResult.from_row(row)

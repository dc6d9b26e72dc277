"""Named statements on ``tool_calls``, the idempotency record."""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import DictRow
from psycopg.types.json import Json

Conn = AsyncConnection[DictRow]

GET = """
SELECT tool_call_id, fingerprint, status_code, response FROM tool_calls
WHERE tool_call_id = %(tool_call_id)s
"""

# A concurrent call with the same id waits on the primary key until the first commits, then fails
# with a unique violation: the caller rolls back and replays the recorded answer.
RECORD = """
INSERT INTO tool_calls (tool_call_id, conversation_id, tool, fingerprint, status_code, response)
VALUES (%(tool_call_id)s, %(conversation_id)s, %(tool)s, %(fingerprint)s, %(status_code)s,
        %(response)s)
"""


async def get(conn: Conn, tool_call_id: str) -> DictRow | None:
    cursor = await conn.execute(GET, {"tool_call_id": tool_call_id})
    return await cursor.fetchone()


async def record(
    conn: Conn,
    *,
    tool_call_id: str,
    conversation_id: str,
    tool: str,
    fingerprint: str,
    status_code: int,
    response: dict[str, Any],
) -> None:
    await conn.execute(
        RECORD,
        {
            "tool_call_id": tool_call_id,
            "conversation_id": conversation_id,
            "tool": tool,
            "fingerprint": fingerprint,
            "status_code": status_code,
            "response": Json(response),
        },
    )

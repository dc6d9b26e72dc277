"""Named statements the MCP face reads operations with, as tasks (one prepared statement each)."""

from __future__ import annotations

from uuid import UUID

from psycopg import AsyncConnection
from psycopg.rows import DictRow

Conn = AsyncConnection[DictRow]

# The columns a task shows, and whether a focusing operation is past its deadline (then the reader
# settles it first, through the use case every read goes through).
TASK_OPERATION = """
SELECT operation_id, tool, tool_call_id, conversation_id, app_scope, instance_id, state, reason,
       activity, duration_seconds, started_at, ends_at, finalized_at, result,
       ends_at <= statement_timestamp() AS overdue
FROM operations WHERE operation_id = %s
"""


async def task_operation(conn: Conn, operation_id: UUID) -> DictRow | None:
    cursor = await conn.execute(TASK_OPERATION, (operation_id,), prepare=True)
    return await cursor.fetchone()

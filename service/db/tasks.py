"""Named statements the MCP face reads operations with, as tasks (one prepared statement each)."""

from __future__ import annotations

from uuid import UUID

from psycopg import AsyncConnection
from psycopg.rows import DictRow

Conn = AsyncConnection[DictRow]

# What a task shows, its times already in the wire format, and whether a focusing operation is past
# its deadline (the reader then settles it first, through the use case every read goes through).
TASK_OPERATION = """
SELECT operation_id::text AS operation_id, conversation_id, state, reason,
       rfc3339(started_at) AS started_at, rfc3339(ends_at) AS ends_at,
       rfc3339(finalized_at) AS finalized_at, result,
       ends_at <= statement_timestamp() AS overdue
FROM operations WHERE operation_id = %s
"""


async def task_operation(conn: Conn, operation_id: UUID) -> DictRow | None:
    cursor = await conn.execute(TASK_OPERATION, (operation_id,), prepare=True)
    return await cursor.fetchone()

"""Named statements on ``interactions`` (Interact's standard interactions)."""

from __future__ import annotations

from uuid import UUID

from psycopg import AsyncConnection
from psycopg.rows import DictRow

Conn = AsyncConnection[DictRow]

COLUMNS = (
    "tool_call_id, conversation_id, prompt, choices, status, asked_in_sub_session_id, answer,"
    " answered_at, created_at"
)


GET = f"SELECT {COLUMNS} FROM interactions WHERE tool_call_id = %(tool_call_id)s"

PENDING = f"""
SELECT {COLUMNS} FROM interactions
WHERE conversation_id = %(conversation_id)s AND status = 'pending'
ORDER BY created_at, tool_call_id
"""

# The interaction behind an interact.ask task (2026-07-28's tasks extension).
BY_TASK = f"""
SELECT {", ".join("i." + column.strip() for column in COLUMNS.split(","))}
FROM interaction_tasks t JOIN interactions i USING (tool_call_id) WHERE t.task_id = %(task_id)s
"""

# Decided once: pending -> answered; the winner queues the one outbox row and posts the answer to
# the main conversation. answer_interaction, service/apps/interact/decisions.sql.
ANSWER = "SELECT * FROM answer_interaction(%(tool_call_id)s, %(answer)s)"


async def get(conn: Conn, tool_call_id: str) -> DictRow | None:
    cursor = await conn.execute(GET, {"tool_call_id": tool_call_id})
    return await cursor.fetchone()


async def by_task(conn: Conn, task_id: UUID) -> DictRow | None:
    cursor = await conn.execute(BY_TASK, {"task_id": task_id})
    return await cursor.fetchone()


async def pending(conn: Conn, conversation_id: str) -> list[DictRow]:
    cursor = await conn.execute(PENDING, {"conversation_id": conversation_id})
    return await cursor.fetchall()


async def answer(conn: Conn, tool_call_id: str, answer_text: str) -> DictRow | None:
    cursor = await conn.execute(ANSWER, {"tool_call_id": tool_call_id, "answer": answer_text})
    return await cursor.fetchone()

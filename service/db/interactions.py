"""Named statements on ``interactions`` (Interact's standard interactions)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from psycopg import AsyncConnection
from psycopg.rows import DictRow
from psycopg.types.json import Jsonb

Conn = AsyncConnection[DictRow]

COLUMNS = (
    "tool_call_id, conversation_id, prompt, choices, status, asked_in_sub_session_id, answer,"
    " answered_at, created_at, tool, forms, answers"
)


GET = f"""
SELECT {COLUMNS} FROM interactions
WHERE tool_call_id = %(tool_call_id)s AND conversation_id = %(conversation_id)s
"""

# The conversation of an interaction named by its tool_call_id alone (unique per conversation, so
# possibly several): among those the caller reaches (NULL: all), the pending one, else the newest.
# On Citus: one index probe on every shard.
CONVERSATION_OF = """
SELECT conversation_id FROM interactions
WHERE tool_call_id = %(tool_call_id)s
  AND (%(reach)s::text[] IS NULL OR conversation_id = ANY(%(reach)s::text[]))
ORDER BY status = 'pending' DESC, created_at DESC
LIMIT 2
"""

PENDING = f"""
SELECT {COLUMNS} FROM interactions
WHERE conversation_id = %(conversation_id)s AND status = 'pending'
ORDER BY created_at, tool_call_id
"""

# The interaction behind an interact.ask task (2026-07-28's tasks extension).
BY_TASK = f"""
SELECT {", ".join("i." + column.strip() for column in COLUMNS.split(","))}
FROM interaction_tasks t JOIN interactions i USING (tool_call_id, conversation_id)
WHERE t.task_id = %(task_id)s
"""

# Decided once: pending -> answered; the winner queues the one outbox row and posts the answer to
# the main conversation. answer_interaction_v2, service/apps/interact/decisions.sql.
ANSWER = "SELECT * FROM answer_interaction_v2(%(conversation_id)s, %(tool_call_id)s, %(answer)s)"

# An app's question of forms: the forms not yet answered among those given are added, each once;
# the answer completing the last decides it and queues the one outbox row. answer_app_form,
# service/db/sql/75_app_api.sql.
ANSWER_FORMS = f"SELECT {COLUMNS} FROM answer_app_form(%(conversation_id)s, %(tool_call_id)s, %(answers)s)"


async def get(conn: Conn, conversation_id: str, tool_call_id: str) -> DictRow | None:
    cursor = await conn.execute(GET, {"conversation_id": conversation_id, "tool_call_id": tool_call_id})
    return await cursor.fetchone()


async def conversations_of(conn: Conn, tool_call_id: str, reach: list[str] | None) -> list[str]:
    """The conversations (at most two: one is an answer, two an ambiguity) holding an interaction
    asked by ``tool_call_id``, the pending one first, then the newest."""
    cursor = await conn.execute(CONVERSATION_OF, {"tool_call_id": tool_call_id, "reach": reach})
    return [str(row["conversation_id"]) for row in await cursor.fetchall()]


async def by_task(conn: Conn, task_id: UUID) -> DictRow | None:
    cursor = await conn.execute(BY_TASK, {"task_id": task_id})
    return await cursor.fetchone()


async def pending(conn: Conn, conversation_id: str) -> list[DictRow]:
    cursor = await conn.execute(PENDING, {"conversation_id": conversation_id})
    return await cursor.fetchall()


async def answer_forms(
    conn: Conn, conversation_id: str, tool_call_id: str, answers: dict[str, Any]
) -> DictRow | None:
    params = {"conversation_id": conversation_id, "tool_call_id": tool_call_id, "answers": Jsonb(answers)}
    cursor = await conn.execute(ANSWER_FORMS, params)
    return await cursor.fetchone()


async def answer(conn: Conn, conversation_id: str, tool_call_id: str, answer_text: str) -> DictRow | None:
    params = {"conversation_id": conversation_id, "tool_call_id": tool_call_id, "answer": answer_text}
    cursor = await conn.execute(ANSWER, params)
    return await cursor.fetchone()

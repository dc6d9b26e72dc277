"""Named statements the MCP face reads its tasks with (one prepared statement each).

A task is an operation (``pomodoro.start``; the task id is its ``operation_id``) or an interaction
(``interact.ask`` at 2026-07-28; the task id is its random ``interaction_tasks.task_id``, never the
caller's ``tool_call_id``).
"""

from __future__ import annotations

from uuid import UUID

from psycopg import AsyncConnection
from psycopg.rows import DictRow

Conn = AsyncConnection[DictRow]

# Either kind of task, in the same columns, as stored (``service.use_cases.serializers.task_view``
# words them): ``state`` is the operation's or the interaction's (``pending``, ``answered``),
# ``result`` the object the relay delivers once final, ``overdue`` whether a focusing operation is
# past its deadline (the reader then settles it first, through the use case every read goes through).
_INTERACTION_TASK = """
SELECT 'interaction' AS kind, t.task_id, i.conversation_id, i.status AS state, NULL::text AS reason,
       i.created_at AS started_at, NULL::timestamptz AS ends_at, i.answered_at AS finalized_at,
       CASE WHEN i.status = 'answered' THEN question_result(i.answer, i.answers, i.answered_at) END AS result,
       false AS overdue
FROM interaction_tasks t JOIN interactions i USING (tool_call_id, conversation_id)
"""

TASK = f"""
SELECT 'operation' AS kind, operation_id AS task_id, conversation_id, state, reason, started_at, ends_at,
       finalized_at, result, ends_at <= statement_timestamp() AS overdue
FROM operations WHERE operation_id = %(task_id)s
UNION ALL
{_INTERACTION_TASK} WHERE t.task_id = %(task_id)s
"""

# The task of an interaction just asked (or replayed): made once, the same id ever after (DO UPDATE,
# not DO NOTHING, so that a replay racing the first call still gets the row back). Only an
# interaction of the caller's conversation gets one.
INTERACTION_TASK_FOR = f"""
WITH task AS (
    INSERT INTO interaction_tasks (task_id, tool_call_id, conversation_id)
    SELECT gen_random_uuid(), i.tool_call_id, i.conversation_id FROM interactions i
    WHERE i.tool_call_id = %(tool_call_id)s AND i.conversation_id = %(conversation_id)s
    ON CONFLICT (tool_call_id, conversation_id) DO UPDATE SET tool_call_id = EXCLUDED.tool_call_id
    RETURNING task_id, tool_call_id, conversation_id
)
{_INTERACTION_TASK.replace("FROM interaction_tasks t", "FROM task t")}
"""


async def task(conn: Conn, task_id: UUID) -> DictRow | None:
    cursor = await conn.execute(TASK, {"task_id": task_id}, prepare=True)
    return await cursor.fetchone()


async def interaction_task_for(conn: Conn, tool_call_id: str, conversation_id: str) -> DictRow | None:
    cursor = await conn.execute(
        INTERACTION_TASK_FOR, {"tool_call_id": tool_call_id, "conversation_id": conversation_id}
    )
    return await cursor.fetchone()


# A long-running call of the conversation (``operation_status``, the ending for MCP clients
# without tasks), either kind, in the same columns: an operation (``pomodoro.start``) or an
# interaction (``interact.ask``, which waits for the person: ``pending``, then ``answered`` with the
# result its outbox row carries; no ``operation_id``, ``reason`` or ``ends_at``). ``overdue`` as in
# ``TASK``. One statement either way.
_OPERATION_CALL = """
SELECT operation_id, tool, tool_call_id, conversation_id, state, reason, started_at, ends_at,
       finalized_at, result, ends_at <= statement_timestamp() AND state = 'focusing' AS overdue
FROM operations WHERE conversation_id = %(conversation_id)s
"""
_INTERACTION_CALL = """
SELECT NULL::uuid AS operation_id, coalesce(tool, 'interact.ask') AS tool, tool_call_id, conversation_id,
       status AS state,
       NULL::text AS reason, created_at AS started_at, NULL::timestamptz AS ends_at,
       answered_at AS finalized_at,
       CASE WHEN status = 'answered' THEN question_result(answer, answers, answered_at) END AS result,
       false AS overdue
FROM interactions WHERE conversation_id = %(conversation_id)s
"""

# The conversation's latest long-running call, whatever app's: its latest operation (by
# ix_operations_conversation_started) or its latest question (by
# ix_interactions_conversation_created), whichever began last.
LATEST_CALL = f"""
({_OPERATION_CALL} ORDER BY started_at DESC, operation_id DESC LIMIT 1)
UNION ALL
({_INTERACTION_CALL} ORDER BY created_at DESC, tool_call_id DESC LIMIT 1)
ORDER BY started_at DESC, operation_id NULLS LAST LIMIT 1
"""

# The conversation's long-running call named by its tool call id (unique per conversation: an
# operation or a question, never both).
CALL = f"""
{_OPERATION_CALL} AND tool_call_id = %(tool_call_id)s
UNION ALL
{_INTERACTION_CALL} AND tool_call_id = %(tool_call_id)s
LIMIT 1
"""


async def latest_call(conn: Conn, conversation_id: str) -> DictRow | None:
    cursor = await conn.execute(LATEST_CALL, {"conversation_id": conversation_id}, prepare=True)
    return await cursor.fetchone()


async def call(conn: Conn, conversation_id: str, tool_call_id: str) -> DictRow | None:
    cursor = await conn.execute(
        CALL, {"conversation_id": conversation_id, "tool_call_id": tool_call_id}, prepare=True
    )
    return await cursor.fetchone()

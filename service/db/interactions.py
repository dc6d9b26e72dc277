"""Named statements on ``interactions`` (Interact's standard interactions)."""

from __future__ import annotations

from psycopg import AsyncConnection
from psycopg.rows import DictRow

Conn = AsyncConnection[DictRow]

COLUMNS = (
    "tool_call_id, conversation_id, prompt, choices, status, asked_in_sub_session_id, answer,"
    " answered_at, created_at"
)


def answered_result(row: str) -> str:
    """The result of an answered ``interact.ask``, as its outbox row carries it (and its task shows
    it), built from the columns of ``row``."""
    return (
        f"jsonb_build_object('state', 'answered', 'answer', {row}.answer, "
        f"'answered_at', rfc3339({row}.answered_at))"
    )


GET = f"SELECT {COLUMNS} FROM interactions WHERE tool_call_id = %(tool_call_id)s"

PENDING = f"""
SELECT {COLUMNS} FROM interactions
WHERE conversation_id = %(conversation_id)s AND status = 'pending'
ORDER BY created_at, tool_call_id
"""

# Decided once: pending -> answered. The winner, in the same statement, queues the one outbox row
# for the interact.ask call and appends the answer to the main conversation (never to the
# sub-session it was asked in, which may have ended).
ANSWER = f"""
WITH answered AS (
    UPDATE interactions SET status = 'answered', answer = %(answer)s,
                            answered_at = statement_timestamp()
    WHERE tool_call_id = %(tool_call_id)s AND status = 'pending'
    RETURNING {COLUMNS}
),
sequenced AS (
    UPDATE workspaces w SET outbox_sequence = w.outbox_sequence + 1
    FROM answered a
    WHERE w.conversation_id = a.conversation_id
    RETURNING w.conversation_id, w.outbox_sequence
),
events AS (
    SELECT gen_random_uuid() AS event_id, a.tool_call_id, a.conversation_id, a.answer,
           a.answered_at, q.outbox_sequence
    FROM answered a JOIN sequenced q USING (conversation_id)
),
queued AS (
    INSERT INTO outbox (event_id, operation_id, tool, tool_call_id, conversation_id, sequence, payload)
    SELECT e.event_id, NULL, 'interact.ask', e.tool_call_id, e.conversation_id, e.outbox_sequence,
           jsonb_build_object(
               'event_id', e.event_id, 'type', 'tool.result', 'tool', 'interact.ask',
               'tool_call_id', e.tool_call_id, 'conversation_id', e.conversation_id,
               'operation_id', NULL, 'sequence', e.outbox_sequence,
               'result', {answered_result("e")})
    FROM events e
    RETURNING event_id
),
message AS (
    INSERT INTO messages (message_id, conversation_id, sub_session_id, role, text, created_at)
    SELECT gen_random_uuid(), a.conversation_id, NULL, 'user', a.answer, a.answered_at
    FROM answered a
    RETURNING message_id
)
SELECT a.*, (SELECT event_id FROM queued) AS event_id, (SELECT message_id FROM message) AS message_id
FROM answered a
"""


async def get(conn: Conn, tool_call_id: str) -> DictRow | None:
    cursor = await conn.execute(GET, {"tool_call_id": tool_call_id})
    return await cursor.fetchone()


async def pending(conn: Conn, conversation_id: str) -> list[DictRow]:
    cursor = await conn.execute(PENDING, {"conversation_id": conversation_id})
    return await cursor.fetchall()


async def answer(conn: Conn, tool_call_id: str, answer_text: str) -> DictRow | None:
    cursor = await conn.execute(ANSWER, {"tool_call_id": tool_call_id, "answer": answer_text})
    return await cursor.fetchone()

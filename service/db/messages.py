"""Named statements on ``messages`` and ``sub_sessions``."""

from __future__ import annotations

from uuid import UUID

from psycopg import AsyncConnection
from psycopg.rows import DictRow

Conn = AsyncConnection[DictRow]

SUB_SESSION = """
SELECT sub_session_id, instance_id, conversation_id, status FROM sub_sessions
WHERE sub_session_id = %(sub_session_id)s AND conversation_id = %(conversation_id)s
"""

# The trigger messages_sub_session_open refuses a message into an ended sub-session.
INSERT = """
INSERT INTO messages (message_id, conversation_id, sub_session_id, role, text, created_at)
VALUES (uuid_v7(), %(conversation_id)s, %(sub_session_id)s, %(role)s, %(text)s,
        statement_timestamp())
RETURNING message_id, conversation_id, sub_session_id, role, text, created_at
"""

MAIN_CONVERSATION = """
SELECT message_id, conversation_id, sub_session_id, role, text, created_at FROM messages
WHERE conversation_id = %(conversation_id)s AND sub_session_id IS NULL
ORDER BY created_at, message_id
LIMIT %(limit)s
"""

IN_SUB_SESSION = """
SELECT message_id, conversation_id, sub_session_id, role, text, created_at FROM messages
WHERE conversation_id = %(conversation_id)s AND sub_session_id = %(sub_session_id)s
ORDER BY created_at, message_id
LIMIT %(limit)s
"""


async def sub_session(conn: Conn, conversation_id: str, sub_session_id: UUID) -> DictRow | None:
    """The conversation's sub-session (one of another conversation is not found)."""
    params = {"conversation_id": conversation_id, "sub_session_id": sub_session_id}
    cursor = await conn.execute(SUB_SESSION, params)
    return await cursor.fetchone()


async def insert(
    conn: Conn, *, conversation_id: str, sub_session_id: UUID | None, role: str, text: str
) -> DictRow:
    cursor = await conn.execute(
        INSERT,
        {
            "conversation_id": conversation_id,
            "sub_session_id": sub_session_id,
            "role": role,
            "text": text,
        },
    )
    row = await cursor.fetchone()
    assert row is not None
    return row


async def listing(conn: Conn, conversation_id: str, sub_session_id: UUID | None, limit: int) -> list[DictRow]:
    if sub_session_id is None:
        cursor = await conn.execute(MAIN_CONVERSATION, {"conversation_id": conversation_id, "limit": limit})
    else:
        cursor = await conn.execute(
            IN_SUB_SESSION,
            {"conversation_id": conversation_id, "sub_session_id": sub_session_id, "limit": limit},
        )
    return await cursor.fetchall()

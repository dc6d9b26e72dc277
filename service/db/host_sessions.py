"""Named statements on ``host_sessions``: a person's scoped, revocable session."""

from __future__ import annotations

from uuid import UUID

from psycopg import AsyncConnection
from psycopg.rows import DictRow

Conn = AsyncConnection[DictRow]

CREATE = """
INSERT INTO host_sessions (session_id, subject, conversation_ids, created_at, expires_at)
VALUES (%(session_id)s, %(subject)s, %(conversation_ids)s, statement_timestamp(),
        statement_timestamp() + make_interval(secs => %(ttl_seconds)s))
RETURNING session_id, subject, conversation_ids, rfc3339(expires_at) AS expires_at
"""

# Only a session that is neither revoked nor expired, by the database clock; expires_in is how
# long it has left by that clock (what a stream that outlives a request counts down).
ACTIVE = """
SELECT session_id, subject, conversation_ids, rfc3339(expires_at) AS expires_at,
       EXTRACT(EPOCH FROM expires_at - statement_timestamp())::float8 AS expires_in
FROM host_sessions
WHERE session_id = %(session_id)s AND revoked_at IS NULL AND expires_at > statement_timestamp()
"""

# Of these sessions, the ones still open (what a process's event streams re-check, all in one).
OPEN_AMONG = """
SELECT session_id FROM host_sessions
WHERE session_id = ANY(%(session_ids)s) AND revoked_at IS NULL AND expires_at > statement_timestamp()
"""

REVOKE = """
UPDATE host_sessions SET revoked_at = coalesce(revoked_at, statement_timestamp())
WHERE session_id = %(session_id)s
RETURNING session_id
"""

# Sessions a day past their expiry (or revocation) are of no use even to an audit of sign-ins.
PRUNE = """
DELETE FROM host_sessions
WHERE session_id IN (
    SELECT session_id FROM host_sessions
    WHERE coalesce(revoked_at, expires_at) < statement_timestamp() - make_interval(secs => %(after)s)
    LIMIT 1000)
"""


async def create(
    conn: Conn, *, session_id: UUID, subject: str, conversation_ids: list[str] | None, ttl_seconds: int
) -> DictRow:
    cursor = await conn.execute(
        CREATE,
        {
            "session_id": session_id,
            "subject": subject,
            "conversation_ids": conversation_ids,
            "ttl_seconds": ttl_seconds,
        },
    )
    row = await cursor.fetchone()
    assert row is not None
    return row


async def active(conn: Conn, session_id: UUID) -> DictRow | None:
    cursor = await conn.execute(ACTIVE, {"session_id": session_id}, prepare=True)
    return await cursor.fetchone()


async def open_among(conn: Conn, session_ids: list[UUID]) -> set[UUID]:
    cursor = await conn.execute(OPEN_AMONG, {"session_ids": session_ids}, prepare=True)
    return {row["session_id"] for row in await cursor.fetchall()}


async def revoke(conn: Conn, session_id: UUID) -> bool:
    cursor = await conn.execute(REVOKE, {"session_id": session_id})
    return await cursor.fetchone() is not None


async def prune(conn: Conn, after_seconds: int) -> int:
    cursor = await conn.execute(PRUNE, {"after": after_seconds})
    return cursor.rowcount

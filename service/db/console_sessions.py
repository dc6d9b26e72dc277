"""Named statements on ``console_sessions``: the operator console's revocable sign-ins."""

from __future__ import annotations

from uuid import UUID

from psycopg import AsyncConnection
from psycopg.rows import DictRow

Conn = AsyncConnection[DictRow]

OPEN = """
INSERT INTO console_sessions (session_id, created_at, expires_at)
VALUES (%(session_id)s, statement_timestamp(), statement_timestamp() + make_interval(secs => %(seconds)s))
"""

# Open: neither ended nor expired, by the database clock.
ACTIVE = """
SELECT 1 FROM console_sessions
WHERE session_id = %(session_id)s AND revoked_at IS NULL AND expires_at > statement_timestamp()
"""

END = """
UPDATE console_sessions SET revoked_at = coalesce(revoked_at, statement_timestamp())
WHERE session_id = %(session_id)s
"""

# A day after it ended, a sign-in is of no further use.
PRUNE = """
DELETE FROM console_sessions
WHERE session_id IN (
    SELECT session_id FROM console_sessions
    WHERE coalesce(revoked_at, expires_at) < statement_timestamp() - make_interval(secs => %(after)s)
    LIMIT 1000)
"""


async def open_session(conn: Conn, session_id: UUID, seconds: int) -> None:
    await conn.execute(OPEN, {"session_id": session_id, "seconds": seconds})


async def active(conn: Conn, session_id: UUID) -> bool:
    cursor = await conn.execute(ACTIVE, {"session_id": session_id}, prepare=True)
    return await cursor.fetchone() is not None


async def end(conn: Conn, session_id: UUID) -> None:
    await conn.execute(END, {"session_id": session_id})


async def prune(conn: Conn, after_seconds: int) -> int:
    cursor = await conn.execute(PRUNE, {"after": after_seconds})
    return cursor.rowcount

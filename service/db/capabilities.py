"""Named statements on ``capabilities``: SDK tokens, kept only as SHA-256 digests."""

from __future__ import annotations

from uuid import UUID

from psycopg import AsyncConnection
from psycopg.rows import DictRow

Conn = AsyncConnection[DictRow]

# The binding (scope, conversation) is copied from the instance itself, never taken from a caller,
# with the person's session it is minted under (NULL: HOST_TOKEN). No row back: no such instance.
MINT = """
INSERT INTO capabilities (token_hash, instance_id, app_scope, conversation_id, host_session_id)
SELECT %(token_hash)s, instance_id, app_scope, conversation_id, %(host_session_id)s
FROM app_instances
WHERE instance_id = %(instance_id)s AND conversation_id = %(conversation_id)s
RETURNING instance_id
"""

# How many a person's session has minted, read under its row's lock: two mints of one session
# count one after the other, so the bound holds exactly. No row: the session has ended.
MINTED_UNDER_SESSION = """
SELECT (SELECT count(*) FROM capabilities WHERE host_session_id = s.session_id) AS minted
FROM host_sessions s
WHERE s.session_id = %(host_session_id)s AND s.revoked_at IS NULL AND s.expires_at > statement_timestamp()
"""
LOCK_SESSION = "SELECT 1 FROM host_sessions WHERE session_id = %(host_session_id)s FOR UPDATE"

# The binding only (the instance's status is read by each use case in its own transaction, where
# it cannot go stale before it is used), while the session it was minted under is open.
LOOKUP = """
SELECT c.instance_id, c.app_scope, c.conversation_id
FROM capabilities c
LEFT JOIN host_sessions s ON s.session_id = c.host_session_id
WHERE c.token_hash = %(token_hash)s
  AND (c.host_session_id IS NULL
       OR (s.revoked_at IS NULL AND s.expires_at > statement_timestamp()))
"""


async def mint(
    conn: Conn, token_hash: bytes, instance_id: UUID, conversation_id: str, host_session_id: UUID | None
) -> bool:
    params = {
        "token_hash": token_hash,
        "instance_id": instance_id,
        "conversation_id": conversation_id,
        "host_session_id": host_session_id,
    }
    cursor = await conn.execute(MINT, params)
    return await cursor.fetchone() is not None


async def minted_under_session(conn: Conn, host_session_id: UUID) -> int | None:
    """The capabilities a session has minted, its row locked until the transaction ends; None when
    the session has ended."""
    await conn.execute(LOCK_SESSION, {"host_session_id": host_session_id})
    cursor = await conn.execute(MINTED_UNDER_SESSION, {"host_session_id": host_session_id})
    row = await cursor.fetchone()
    return None if row is None else int(row["minted"])


async def lookup(conn: Conn, token_hash: bytes) -> DictRow | None:
    cursor = await conn.execute(LOOKUP, {"token_hash": token_hash})
    return await cursor.fetchone()


# Capabilities of closed instances are only for history display; a day after minting they go.
PRUNE_CLOSED = """
DELETE FROM capabilities WHERE token_hash IN (
    SELECT c.token_hash FROM capabilities c JOIN app_instances i USING (instance_id, conversation_id)
    WHERE i.status = 'closed' AND c.created_at < now() - make_interval(secs => %(older_than_seconds)s)
    LIMIT %(batch)s
)
"""


async def prune_closed(conn: Conn, older_than_seconds: float, batch: int = 500) -> int:
    cursor = await conn.execute(PRUNE_CLOSED, {"older_than_seconds": older_than_seconds, "batch": batch})
    return cursor.rowcount

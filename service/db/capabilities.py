"""Named statements on ``capabilities``: SDK tokens, kept only as SHA-256 digests."""

from __future__ import annotations

from uuid import UUID

from psycopg import AsyncConnection
from psycopg.rows import DictRow

Conn = AsyncConnection[DictRow]

# The binding (scope, conversation) is copied from the instance itself, never taken from a caller.
# No row back means no such instance.
MINT = """
INSERT INTO capabilities (token_hash, instance_id, app_scope, conversation_id)
SELECT %(token_hash)s, instance_id, app_scope, conversation_id
FROM app_instances
WHERE instance_id = %(instance_id)s
RETURNING instance_id
"""

# The binding only: the instance's status is read by each use case in its own transaction, where
# it cannot go stale before it is used.
LOOKUP = """
SELECT instance_id, app_scope, conversation_id FROM capabilities WHERE token_hash = %(token_hash)s
"""


async def mint(conn: Conn, token_hash: bytes, instance_id: UUID) -> bool:
    cursor = await conn.execute(MINT, {"token_hash": token_hash, "instance_id": instance_id})
    return await cursor.fetchone() is not None


async def lookup(conn: Conn, token_hash: bytes) -> DictRow | None:
    cursor = await conn.execute(LOOKUP, {"token_hash": token_hash})
    return await cursor.fetchone()


# Capabilities of closed instances are only for history display; a day after minting they go.
PRUNE_CLOSED = """
DELETE FROM capabilities WHERE token_hash IN (
    SELECT c.token_hash FROM capabilities c JOIN app_instances i USING (instance_id)
    WHERE i.status = 'closed' AND c.created_at < now() - make_interval(secs => %(older_than_seconds)s)
    LIMIT %(batch)s
)
"""


async def prune_closed(conn: Conn, older_than_seconds: float, batch: int = 500) -> int:
    cursor = await conn.execute(PRUNE_CLOSED, {"older_than_seconds": older_than_seconds, "batch": batch})
    return cursor.rowcount

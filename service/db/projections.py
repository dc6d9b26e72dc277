"""Named statements on ``projection_events``."""

from __future__ import annotations

from psycopg import AsyncConnection
from psycopg.rows import DictRow

Conn = AsyncConnection[DictRow]
# Rows per read of one conversation's new events.
PAGE = 200

AFTER = """
SELECT event_seq, kind, payload FROM projection_events
WHERE conversation_id = %(conversation_id)s AND event_seq > %(after)s
ORDER BY event_seq
LIMIT %(limit)s
"""

LATEST = """
SELECT coalesce(max(event_seq), 0) AS event_seq FROM projection_events
WHERE conversation_id = %(conversation_id)s
"""

PRUNE = """
DELETE FROM projection_events WHERE (conversation_id, event_seq) IN (
    SELECT conversation_id, event_seq FROM projection_events
    WHERE created_at < now() - make_interval(secs => %(older_than_seconds)s)
    ORDER BY event_seq LIMIT %(batch)s
)
"""


async def after(conn: Conn, conversation_id: str, after_seq: int, limit: int = PAGE) -> list[DictRow]:
    cursor = await conn.execute(
        AFTER, {"conversation_id": conversation_id, "after": after_seq, "limit": limit}
    )
    return await cursor.fetchall()


async def latest(conn: Conn, conversation_id: str) -> int:
    cursor = await conn.execute(LATEST, {"conversation_id": conversation_id})
    row = await cursor.fetchone()
    return int(row["event_seq"]) if row else 0


async def prune(conn: Conn, older_than_seconds: float, batch: int = 500) -> int:
    cursor = await conn.execute(PRUNE, {"older_than_seconds": older_than_seconds, "batch": batch})
    return cursor.rowcount

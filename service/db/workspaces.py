"""Named statements on ``workspaces`` and the app instances shown in them."""

from __future__ import annotations

from uuid import UUID

from psycopg import AsyncConnection
from psycopg.rows import DictRow

Conn = AsyncConnection[DictRow]

# Every use case that changes a conversation takes this lock first (one lock order, no deadlocks):
# lock_workspace, service/db/sql/40_workspaces.sql, the lock the decision functions take too.
LOCK = "SELECT lock_workspace(%(conversation_id)s, %(create)s) AS locked"

GET = """
SELECT conversation_id, foreground_instance_id, statement_timestamp() AS server_time
FROM workspaces WHERE conversation_id = %(conversation_id)s
"""

SET_FOREGROUND = """
UPDATE workspaces SET foreground_instance_id = %(instance_id)s, updated_at = statement_timestamp()
WHERE conversation_id = %(conversation_id)s
"""

INSTANCES = """
SELECT i.instance_id, i.app_scope, i.status, s.sub_session_id
FROM app_instances i
LEFT JOIN sub_sessions s ON s.instance_id = i.instance_id AND s.conversation_id = i.conversation_id
WHERE i.conversation_id = %(conversation_id)s
ORDER BY i.opened_at DESC, i.instance_id
"""

# An instance named by its id alone: where a request names only the instance, this finds its
# conversation (on Citus: one index probe on every shard), before any transaction.
CONVERSATION_OF_INSTANCE = "SELECT conversation_id FROM app_instances WHERE instance_id = %(instance_id)s"

INSTANCE = """
SELECT i.instance_id, i.conversation_id, i.app_scope, i.status, i.opened_at, i.closed_at,
       s.sub_session_id
FROM app_instances i
LEFT JOIN sub_sessions s ON s.instance_id = i.instance_id AND s.conversation_id = i.conversation_id
WHERE i.instance_id = %(instance_id)s AND i.conversation_id = %(conversation_id)s
"""

OPEN_INSTANCE_OF_SCOPE = """
SELECT i.instance_id, s.sub_session_id FROM app_instances i
LEFT JOIN sub_sessions s ON s.instance_id = i.instance_id AND s.conversation_id = i.conversation_id
WHERE i.conversation_id = %(conversation_id)s AND i.app_scope = %(app_scope)s AND i.status = 'open'
"""

SERVER_TIME = "SELECT statement_timestamp() AS now"


async def lock_or_create(conn: Conn, conversation_id: str) -> None:
    await conn.execute(LOCK, {"conversation_id": conversation_id, "create": True})


async def lock_existing(conn: Conn, conversation_id: str) -> bool:
    """False: the conversation was never seen."""
    cursor = await conn.execute(LOCK, {"conversation_id": conversation_id, "create": False})
    row = await cursor.fetchone()
    return row is not None and bool(row["locked"])


async def get(conn: Conn, conversation_id: str) -> DictRow | None:
    cursor = await conn.execute(GET, {"conversation_id": conversation_id})
    return await cursor.fetchone()


async def set_foreground(conn: Conn, conversation_id: str, instance_id: UUID | None) -> None:
    await conn.execute(SET_FOREGROUND, {"conversation_id": conversation_id, "instance_id": instance_id})


async def instances(conn: Conn, conversation_id: str) -> list[DictRow]:
    cursor = await conn.execute(INSTANCES, {"conversation_id": conversation_id})
    return await cursor.fetchall()


async def conversation_of_instance(conn: Conn, instance_id: UUID) -> str | None:
    cursor = await conn.execute(CONVERSATION_OF_INSTANCE, {"instance_id": instance_id})
    row = await cursor.fetchone()
    return None if row is None else str(row["conversation_id"])


async def instance(conn: Conn, instance_id: UUID, conversation_id: str) -> DictRow | None:
    cursor = await conn.execute(INSTANCE, {"instance_id": instance_id, "conversation_id": conversation_id})
    return await cursor.fetchone()


async def open_instance_of_scope(conn: Conn, conversation_id: str, app_scope: str) -> DictRow | None:
    cursor = await conn.execute(
        OPEN_INSTANCE_OF_SCOPE, {"conversation_id": conversation_id, "app_scope": app_scope}
    )
    return await cursor.fetchone()


async def server_time(conn: Conn) -> DictRow:
    cursor = await conn.execute(SERVER_TIME)
    row = await cursor.fetchone()
    assert row is not None
    return row

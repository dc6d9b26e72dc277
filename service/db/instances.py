"""Named statements that open and close app instances outside a Pomodoro operation."""

from __future__ import annotations

from uuid import UUID

from psycopg import AsyncConnection
from psycopg.rows import DictRow

Conn = AsyncConnection[DictRow]

# Opens an instance of an app with its sub-session and, when the app declares app.instance-state.v1,
# its empty snapshot (schema_version NULL = no feature): open_instance, service/db/sql/50_instances.sql.
# The caller brings it to the foreground.
OPEN_APP = "SELECT * FROM open_instance(%(conversation_id)s, %(app_scope)s, %(schema_version)s)"

# Closes an open instance that has no focusing operation (those close through settle_focusing_v2):
# its sub-session ends, its snapshot freezes or is deleted by its retention, and Interact gets the
# foreground back if it held it. close_instances_v2, service/db/sql/50_instances.sql.
CLOSE_INSTANCE = """
SELECT close_instances_v2(%(conversation_id)s, ARRAY[%(instance_id)s]::uuid[], statement_timestamp(),
                          %(delete_state)s) AS closed
"""


async def open_app(
    conn: Conn, *, conversation_id: str, app_scope: str, schema_version: int | None
) -> DictRow:
    """The new instance's ``instance_id`` and ``sub_session_id``."""
    cursor = await conn.execute(
        OPEN_APP,
        {
            "conversation_id": conversation_id,
            "app_scope": app_scope,
            "schema_version": schema_version,
        },
    )
    row = await cursor.fetchone()
    assert row is not None
    return row


async def close_instance(conn: Conn, conversation_id: str, instance_id: UUID, *, delete_state: bool) -> bool:
    params = {"conversation_id": conversation_id, "instance_id": instance_id, "delete_state": delete_state}
    cursor = await conn.execute(CLOSE_INSTANCE, params)
    row = await cursor.fetchone()
    return row is not None and row["closed"] > 0


SURFACE_EVENT = """
INSERT INTO surface_events (conversation_id, instance_id, event, created_at)
VALUES (%(conversation_id)s, %(instance_id)s, %(event)s, statement_timestamp())
"""


async def record_surface_event(conn: Conn, conversation_id: str, instance_id: UUID, event: str) -> None:
    params = {"conversation_id": conversation_id, "instance_id": instance_id, "event": event}
    await conn.execute(SURFACE_EVENT, params)

"""Named statements that open and close app instances outside a Pomodoro operation."""

from __future__ import annotations

from uuid import UUID

from psycopg import AsyncConnection
from psycopg.rows import DictRow

Conn = AsyncConnection[DictRow]

# Opens an instance of an app with its sub-session and, when the app declares
# app.instance-state.v1, its empty snapshot (schema_version NULL = no feature).
OPEN_APP = """
WITH instance AS (
    INSERT INTO app_instances (instance_id, conversation_id, app_scope, opened_at)
    VALUES (%(instance_id)s, %(conversation_id)s, %(app_scope)s, statement_timestamp())
    RETURNING instance_id
),
sub_session AS (
    INSERT INTO sub_sessions (sub_session_id, instance_id, conversation_id, started_at)
    SELECT %(sub_session_id)s, instance_id, %(conversation_id)s, statement_timestamp() FROM instance
    RETURNING sub_session_id
),
snapshot AS (
    INSERT INTO instance_states (instance_id, app_scope, schema_version)
    SELECT instance_id, %(app_scope)s, %(schema_version)s FROM instance
    WHERE %(schema_version)s::integer IS NOT NULL
    RETURNING instance_id
)
SELECT (SELECT instance_id FROM instance) AS instance_id,
       (SELECT sub_session_id FROM sub_session) AS sub_session_id,
       (SELECT count(*) FROM snapshot) AS snapshots
"""

# Closes an open instance that has no focusing operation (those close through settle_focusing):
# ends its sub-session, freezes or deletes its snapshot by its retention, and gives the
# foreground back to Interact if it held it.
CLOSE_INSTANCE = """
WITH closed AS (
    UPDATE app_instances SET status = 'closed', closed_at = statement_timestamp()
    WHERE instance_id = %(instance_id)s AND status = 'open'
    RETURNING instance_id, conversation_id, closed_at
),
ended AS (
    UPDATE sub_sessions ss SET status = 'ended', ended_at = c.closed_at
    FROM closed c WHERE ss.instance_id = c.instance_id AND ss.status = 'open'
    RETURNING ss.sub_session_id
),
frozen AS (
    UPDATE instance_states st SET readonly = true, updated_at = c.closed_at
    FROM closed c
    WHERE st.instance_id = c.instance_id AND NOT %(delete_state)s AND NOT st.readonly
    RETURNING st.instance_id
),
deleted AS (
    DELETE FROM instance_states st USING closed c
    WHERE st.instance_id = c.instance_id AND %(delete_state)s
    RETURNING st.instance_id
),
released AS (
    UPDATE workspaces w SET foreground_instance_id = NULL, updated_at = c.closed_at
    FROM closed c
    WHERE w.conversation_id = c.conversation_id AND w.foreground_instance_id = c.instance_id
    RETURNING w.conversation_id
)
SELECT c.instance_id,
       (SELECT count(*) FROM ended) + (SELECT count(*) FROM frozen) + (SELECT count(*) FROM deleted)
       + (SELECT count(*) FROM released) AS touched
FROM closed c
"""


async def open_app(
    conn: Conn,
    *,
    instance_id: UUID,
    sub_session_id: UUID,
    conversation_id: str,
    app_scope: str,
    schema_version: int | None,
) -> DictRow:
    cursor = await conn.execute(
        OPEN_APP,
        {
            "instance_id": instance_id,
            "sub_session_id": sub_session_id,
            "conversation_id": conversation_id,
            "app_scope": app_scope,
            "schema_version": schema_version,
        },
    )
    row = await cursor.fetchone()
    assert row is not None
    return row


async def close_instance(conn: Conn, instance_id: UUID, *, delete_state: bool) -> bool:
    cursor = await conn.execute(CLOSE_INSTANCE, {"instance_id": instance_id, "delete_state": delete_state})
    return await cursor.fetchone() is not None


SURFACE_EVENT = """
INSERT INTO surface_events (instance_id, event, created_at)
VALUES (%(instance_id)s, %(event)s, statement_timestamp())
"""


async def record_surface_event(conn: Conn, instance_id: UUID, event: str) -> None:
    await conn.execute(SURFACE_EVENT, {"instance_id": instance_id, "event": event})

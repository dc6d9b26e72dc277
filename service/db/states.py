"""Named statements on ``instance_states``: the app.instance-state.v1 snapshot of an instance."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from psycopg import AsyncConnection
from psycopg.rows import DictRow
from psycopg.types.json import Jsonb

Conn = AsyncConnection[DictRow]

# The instance with its snapshot (NULL columns when it has none, e.g. deleted at close) and the
# focusing operation whose deadline has passed, if any: that one must be settled before answering.
SNAPSHOT = """
SELECT i.instance_id, i.conversation_id, i.app_scope, i.status,
       s.schema_version, s.revision, s.data, s.readonly,
       (SELECT o.operation_id FROM operations o
        WHERE o.instance_id = i.instance_id AND o.conversation_id = i.conversation_id
          AND o.state = 'focusing'
          AND o.ends_at <= statement_timestamp()
        LIMIT 1) AS overdue_operation_id
FROM app_instances i
LEFT JOIN instance_states s ON s.instance_id = i.instance_id AND s.conversation_id = i.conversation_id
WHERE i.instance_id = %(instance_id)s AND i.conversation_id = %(conversation_id)s
"""

# Compare-and-set on the revision. Under READ COMMITTED a concurrent writer or close makes this
# statement wait for the row and re-check the predicate on the committed version: of writers with
# the same expected revision exactly one gets a row back, and nothing is written after a freeze.
WRITE = """
UPDATE instance_states
SET data = %(data)s, revision = revision + 1, updated_at = now()
WHERE instance_id = %(instance_id)s AND conversation_id = %(conversation_id)s
  AND revision = %(expected_revision)s AND NOT readonly
RETURNING revision
"""


async def snapshot(conn: Conn, instance_id: UUID, conversation_id: str) -> DictRow | None:
    cursor = await conn.execute(SNAPSHOT, {"instance_id": instance_id, "conversation_id": conversation_id})
    return await cursor.fetchone()


async def write(
    conn: Conn, instance_id: UUID, conversation_id: str, expected_revision: int, data: dict[str, Any]
) -> int | None:
    """The new revision, or None when the revision moved on or the snapshot is frozen or gone."""
    params = {
        "instance_id": instance_id,
        "conversation_id": conversation_id,
        "expected_revision": expected_revision,
        "data": Jsonb(data),
    }
    cursor = await conn.execute(WRITE, params)
    row = await cursor.fetchone()
    return None if row is None else int(row["revision"])

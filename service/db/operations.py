"""Named statements on ``operations``; the terminal transition is ``settle_focusing``."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from psycopg import AsyncConnection
from psycopg.rows import DictRow

from service.domain.operations import Ending

Conn = AsyncConnection[DictRow]

# The one compare-and-set every ending goes through. It decides by the database clock: arriving at
# or after ends_at settles `completed` whatever the caller asked for. Only rows still focusing are
# touched, so of several concurrent callers exactly one gets a row back; in the same statement the
# winner closes the instance, ends its sub-session, freezes the snapshot, hands the foreground back
# to Interact and queues the one outbox row under the conversation's next sequence number.
SETTLE_FOCUSING = """
WITH decision AS (
    SELECT o.operation_id,
           CASE WHEN o.ends_at <= statement_timestamp() THEN 'completed' ELSE %(state)s END AS state,
           CASE WHEN o.ends_at <= statement_timestamp() THEN 'deadline_reached' ELSE %(reason)s END
               AS reason,
           statement_timestamp() AS decided_at
    FROM operations o
    WHERE o.operation_id = ANY(%(operation_ids)s)
      AND o.state = 'focusing'
      AND (NOT %(only_due)s OR o.ends_at <= statement_timestamp())
),
settled AS (
    UPDATE operations o
    SET state = d.state,
        reason = d.reason,
        finalized_at = d.decided_at,
        result = jsonb_build_object(
            'state', d.state,
            'reason', d.reason,
            'activity', o.activity,
            'duration_seconds', o.duration_seconds,
            'started_at', rfc3339(o.started_at),
            'ends_at', rfc3339(o.ends_at),
            'finalized_at', rfc3339(d.decided_at),
            'focused_seconds', LEAST(
                o.duration_seconds,
                floor(EXTRACT(EPOCH FROM d.decided_at - o.started_at))::integer))
    FROM decision d
    WHERE o.operation_id = d.operation_id AND o.state = 'focusing'
    RETURNING o.*
),
closed_instances AS (
    UPDATE app_instances i SET status = 'closed', closed_at = s.finalized_at
    FROM settled s
    WHERE i.instance_id = s.instance_id AND i.status = 'open'
    RETURNING i.instance_id
),
ended_sub_sessions AS (
    UPDATE sub_sessions ss SET status = 'ended', ended_at = s.finalized_at
    FROM settled s
    WHERE ss.instance_id = s.instance_id AND ss.status = 'open'
    RETURNING ss.sub_session_id
),
frozen_states AS (
    UPDATE instance_states st SET readonly = true, updated_at = s.finalized_at
    FROM settled s
    WHERE st.instance_id = s.instance_id AND NOT st.readonly
    RETURNING st.instance_id
),
sequenced AS (
    UPDATE workspaces w
    SET outbox_sequence = w.outbox_sequence + 1,
        foreground_instance_id = CASE WHEN w.foreground_instance_id = s.instance_id
                                      THEN NULL ELSE w.foreground_instance_id END,
        updated_at = s.finalized_at
    FROM settled s
    WHERE w.conversation_id = s.conversation_id
    RETURNING w.conversation_id, w.outbox_sequence
),
events AS (
    SELECT gen_random_uuid() AS event_id, s.operation_id, s.tool, s.tool_call_id,
           s.conversation_id, s.result, q.outbox_sequence
    FROM settled s JOIN sequenced q USING (conversation_id)
),
queued AS (
    INSERT INTO outbox (event_id, operation_id, tool, tool_call_id, conversation_id, sequence, payload)
    SELECT e.event_id, e.operation_id, e.tool, e.tool_call_id, e.conversation_id, e.outbox_sequence,
           jsonb_build_object(
               'event_id', e.event_id, 'type', 'tool.result', 'tool', e.tool,
               'tool_call_id', e.tool_call_id, 'conversation_id', e.conversation_id,
               'operation_id', e.operation_id, 'sequence', e.outbox_sequence, 'result', e.result)
    FROM events e
    RETURNING event_id, operation_id
)
SELECT s.operation_id, s.conversation_id, s.instance_id, s.state, s.reason, s.ends_at,
       s.finalized_at, s.lateness_ms, q.event_id
FROM settled s JOIN queued q USING (operation_id)
"""

# Opens the Pomodoro instance, its sub-session, its empty snapshot and the focusing operation, and
# brings the instance to the foreground. The caller holds the workspace row lock.
START_POMODORO = """
WITH instance AS (
    INSERT INTO app_instances (instance_id, conversation_id, app_scope, opened_at)
    VALUES (%(instance_id)s, %(conversation_id)s, 'pomodoro', statement_timestamp())
    RETURNING instance_id
),
sub_session AS (
    INSERT INTO sub_sessions (sub_session_id, instance_id, conversation_id, started_at)
    SELECT %(sub_session_id)s, instance_id, %(conversation_id)s, statement_timestamp() FROM instance
    RETURNING sub_session_id
),
snapshot AS (
    INSERT INTO instance_states (instance_id, app_scope, schema_version)
    SELECT instance_id, 'pomodoro', %(schema_version)s FROM instance
    RETURNING instance_id
),
operation AS (
    INSERT INTO operations (operation_id, tool, tool_call_id, conversation_id, app_scope, instance_id,
                            duration_seconds, activity, started_at, ends_at)
    SELECT %(operation_id)s, 'pomodoro.start', %(tool_call_id)s, %(conversation_id)s, 'pomodoro',
           instance_id, %(duration_seconds)s, %(activity)s, statement_timestamp(),
           statement_timestamp() + make_interval(secs => %(duration_seconds)s)
    FROM instance
    RETURNING *
),
foreground AS (
    UPDATE workspaces SET foreground_instance_id = %(instance_id)s, updated_at = statement_timestamp()
    WHERE conversation_id = %(conversation_id)s
    RETURNING conversation_id
)
SELECT o.*, (SELECT sub_session_id FROM sub_session) AS sub_session_id,
       (SELECT count(*) FROM snapshot) + (SELECT count(*) FROM foreground) AS touched,
       pg_notify('lineup_deadlines', rfc3339(o.ends_at)) AS notified
FROM operation o
"""

FOCUSING_IN_CONVERSATION = """
SELECT operation_id, ends_at, ends_at <= statement_timestamp() AS overdue
FROM operations
WHERE conversation_id = %(conversation_id)s AND state = 'focusing' AND tool = 'pomodoro.start'
"""

LATEST_IN_CONVERSATION = """
SELECT operation_id, state, ends_at, finalized_at, statement_timestamp() AS now
FROM operations
WHERE conversation_id = %(conversation_id)s AND tool = 'pomodoro.start'
ORDER BY started_at DESC
LIMIT 1
"""

FOCUSING_FOR_INSTANCE = """
SELECT operation_id FROM operations WHERE instance_id = %(instance_id)s AND state = 'focusing'
"""

LATEST_FOR_INSTANCE = """
SELECT operation_id, state, reason FROM operations
WHERE instance_id = %(instance_id)s ORDER BY started_at DESC LIMIT 1
"""

GET_BY_ID = """
SELECT o.*, o.ends_at <= statement_timestamp() AS overdue FROM operations o
WHERE o.operation_id = %(operation_id)s
"""

# The sweeper's claim: due operations whose conversation nobody else is changing right now. It
# locks the workspace rows (the lock every use case takes first), so it never deadlocks with a
# request, and SKIP LOCKED lets several service replicas sweep side by side.
CLAIM_DUE = """
SELECT o.operation_id
FROM operations o
JOIN workspaces w ON w.conversation_id = o.conversation_id
WHERE o.state = 'focusing' AND o.ends_at <= statement_timestamp()
ORDER BY o.ends_at
LIMIT %(limit)s
FOR UPDATE OF w SKIP LOCKED
"""

SECONDS_UNTIL_NEXT_DEADLINE = """
SELECT EXTRACT(EPOCH FROM min(ends_at) - statement_timestamp())::float8 AS seconds
FROM operations WHERE state = 'focusing'
"""


async def settle_focusing(
    conn: Conn, operation_ids: list[UUID], ending: Ending, *, only_due: bool = False
) -> list[DictRow]:
    cursor = await conn.execute(
        SETTLE_FOCUSING,
        {
            "operation_ids": operation_ids,
            "state": ending.state.value,
            "reason": ending.reason.value,
            "only_due": only_due,
        },
    )
    return await cursor.fetchall()


async def start_pomodoro(conn: Conn, params: dict[str, Any]) -> DictRow:
    cursor = await conn.execute(START_POMODORO, params)
    row = await cursor.fetchone()
    assert row is not None
    return row


async def focusing_in_conversation(conn: Conn, conversation_id: str) -> DictRow | None:
    cursor = await conn.execute(FOCUSING_IN_CONVERSATION, {"conversation_id": conversation_id})
    return await cursor.fetchone()


async def latest_in_conversation(conn: Conn, conversation_id: str) -> DictRow | None:
    cursor = await conn.execute(LATEST_IN_CONVERSATION, {"conversation_id": conversation_id})
    return await cursor.fetchone()


async def focusing_for_instance(conn: Conn, instance_id: UUID) -> DictRow | None:
    cursor = await conn.execute(FOCUSING_FOR_INSTANCE, {"instance_id": instance_id})
    return await cursor.fetchone()


async def latest_for_instance(conn: Conn, instance_id: UUID) -> DictRow | None:
    cursor = await conn.execute(LATEST_FOR_INSTANCE, {"instance_id": instance_id})
    return await cursor.fetchone()


async def get_by_id(conn: Conn, operation_id: UUID) -> DictRow | None:
    cursor = await conn.execute(GET_BY_ID, {"operation_id": operation_id})
    return await cursor.fetchone()


async def claim_due(conn: Conn, limit: int) -> list[UUID]:
    cursor = await conn.execute(CLAIM_DUE, {"limit": limit})
    return [row["operation_id"] for row in await cursor.fetchall()]


async def seconds_until_next_deadline(conn: Conn) -> float | None:
    cursor = await conn.execute(SECONDS_UNTIL_NEXT_DEADLINE)
    row = await cursor.fetchone()
    return None if row is None or row["seconds"] is None else float(row["seconds"])

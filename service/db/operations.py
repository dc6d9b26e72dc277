"""Named statements on ``operations`` — of every app: nothing here names one; the terminal transition
is ``settle_focusing_v2``.

``settle_focusing_v2``, ``settle_due`` and ``settle_if_overdue`` are SQL functions (``70_settle.sql``):
the one compare-and-set every ending goes through, run in the caller's transaction. It decides by
the database clock (arriving at or after ``ends_at`` settles ``completed`` whatever the caller
asked for), touches only rows still focusing — so of several concurrent callers exactly one gets a
row back — and in the same statement closes the instance, ends its sub-session, freezes the
snapshot, hands the foreground back to Interact and queues the one outbox row.
"""

from __future__ import annotations

from uuid import UUID

from psycopg import AsyncConnection
from psycopg.rows import DictRow

from service.domain.operations import Ending

Conn = AsyncConnection[DictRow]

SETTLE_FOCUSING = """
SELECT * FROM settle_focusing_v2(%(conversation_id)s, %(operation_ids)s, %(state)s, %(reason)s,
                                 %(only_due)s)
"""

SETTLE_IF_OVERDUE = "SELECT * FROM settle_if_overdue(%(conversation_id)s)"

# The sweeper's batch: due operations whose workspace nobody holds, claimed with SKIP LOCKED and
# settled in the same statement (one round trip, one implicit transaction).
SETTLE_DUE = "SELECT * FROM settle_due(%(limit)s)"

# The same batch when the sweeper traces, in two statements of one transaction: the claim (the due
# operations with their start calls' trace contexts, their conversations locked), then — once the
# settle's span exists, linked to those contexts — their settling, whose outbox rows carry that
# span's context.
CLAIM_DUE = "SELECT conversation_id, operation_id, traceparent, tracestate FROM claim_due(%(limit)s)"
SETTLE_CLAIMED = """
SELECT * FROM settle_claimed(%(conversation_ids)s::text[], %(operation_ids)s::uuid[],
                             %(traceparent)s, %(tracestate)s)
"""

# On Citus (``FOR UPDATE … SKIP LOCKED`` stays in one shard): the conversations with a due operation,
# read on every shard without a lock, then each settled by ``settle_due_in`` on the worker that
# holds it (a distributed function: the call is delegated whole), under its lock if nobody holds it.
DUE_CONVERSATIONS = """
SELECT conversation_id FROM operations
WHERE state = 'focusing' AND ends_at <= statement_timestamp()
GROUP BY conversation_id
ORDER BY min(ends_at)
LIMIT %(limit)s
"""
SETTLE_DUE_IN = "SELECT * FROM settle_due_in(%s)"
# The same two when the sweeper traces: each due conversation with its due operations' start calls'
# trace contexts, and the settling of one with the settle's span's context.
DUE_CONVERSATIONS_TRACED = """
SELECT conversation_id, array_agg(traceparent) AS traceparents, array_agg(tracestate) AS tracestates,
       array_agg(operation_id) AS operation_ids
FROM operations
WHERE state = 'focusing' AND ends_at <= statement_timestamp()
GROUP BY conversation_id
ORDER BY min(ends_at)
LIMIT %(limit)s
"""
SETTLE_DUE_IN_TRACED = "SELECT * FROM settle_due_in_traced(%s, %s, %s)"

FOCUSING_IN_CONVERSATION = """
SELECT operation_id, app_scope, ends_at, ends_at <= statement_timestamp() AS overdue
FROM operations
WHERE conversation_id = %(conversation_id)s AND state = 'focusing'
ORDER BY started_at, operation_id
"""

FOCUSING_FOR_INSTANCE = """
SELECT operation_id FROM operations
WHERE instance_id = %(instance_id)s AND conversation_id = %(conversation_id)s AND state = 'focusing'
"""

LATEST_FOR_INSTANCE = """
SELECT operation_id, state, reason FROM operations
WHERE instance_id = %(instance_id)s AND conversation_id = %(conversation_id)s
ORDER BY started_at DESC LIMIT 1
"""

# An operation named by its id alone (on Citus: one index probe on every shard).
GET_BY_ID = """
SELECT o.*, o.ends_at <= statement_timestamp() AS overdue FROM operations o
WHERE o.operation_id = %(operation_id)s
"""

# The same, of a known conversation (on Citus: its shard only).
GET_IN_CONVERSATION = """
SELECT o.*, o.ends_at <= statement_timestamp() AS overdue FROM operations o
WHERE o.operation_id = %(operation_id)s AND o.conversation_id = %(conversation_id)s
"""

# The same row and the database clock it was read at (``server_now``), in one statement: the MCP
# App's read (a View has no clock-offset API of its own).
GET_BY_ID_WITH_CLOCK = """
SELECT o.*, o.ends_at <= statement_timestamp() AS overdue, statement_timestamp() AS server_now
FROM operations o
WHERE o.operation_id = %(operation_id)s
"""
GET_IN_CONVERSATION_WITH_CLOCK = """
SELECT o.*, o.ends_at <= statement_timestamp() AS overdue, statement_timestamp() AS server_now
FROM operations o
WHERE o.operation_id = %(operation_id)s AND o.conversation_id = %(conversation_id)s
"""

# The Agent's interrupt of one operation named by its id, in one statement (its own transaction on
# an autocommit connection): the conversation's workspace lock first, then the compare-and-set.
# ``settle_focusing_v2`` takes the operation ids only once the lock is held (its argument depends on
# the lock's result), re-reads the row under it and decides by the database clock, so a row that
# ended meanwhile is left as it is. No row: no such operation (or not in the given conversation).
INTERRUPT_ONE = """
WITH target AS (
    SELECT o.operation_id, o.conversation_id, o.state FROM operations o
    WHERE o.operation_id = %(operation_id)s
      AND (%(conversation_id)s::text IS NULL OR o.conversation_id = %(conversation_id)s)
),
locked AS (
    SELECT t.operation_id, t.conversation_id, lock_workspace(t.conversation_id, false) AS held
    FROM target t WHERE t.state = 'focusing'
),
settled AS (
    SELECT s.* FROM locked l,
    LATERAL settle_focusing_v2(
        l.conversation_id, CASE WHEN l.held THEN ARRAY[l.operation_id] ELSE ARRAY[]::uuid[] END,
        'interrupted', %(reason)s) s
)
SELECT t.operation_id, t.conversation_id, s.instance_id, s.state, s.reason, s.ends_at,
       s.finalized_at, s.lateness_ms, s.event_id
FROM target t LEFT JOIN settled s USING (operation_id)
"""

SECONDS_UNTIL_NEXT_DEADLINE = """
SELECT EXTRACT(EPOCH FROM min(ends_at) - statement_timestamp())::float8 AS seconds
FROM operations WHERE state = 'focusing'
"""


async def settle_focusing(
    conn: Conn, conversation_id: str, operation_ids: list[UUID], ending: Ending, *, only_due: bool = False
) -> list[DictRow]:
    """Ends those of the conversation's operations still focusing; the caller holds its lock."""
    cursor = await conn.execute(
        SETTLE_FOCUSING,
        {
            "conversation_id": conversation_id,
            "operation_ids": operation_ids,
            "state": ending.state.value,
            "reason": ending.reason.value,
            "only_due": only_due,
        },
    )
    return await cursor.fetchall()


async def settle_if_overdue(conn: Conn, conversation_id: str) -> list[DictRow]:
    """``completed`` for each of the conversation's focusing operations whose deadline has passed.

    The caller holds the conversation's workspace lock.
    """
    cursor = await conn.execute(SETTLE_IF_OVERDUE, {"conversation_id": conversation_id})
    return await cursor.fetchall()


async def settle_due(conn: Conn, limit: int) -> list[DictRow]:
    cursor = await conn.execute(SETTLE_DUE, {"limit": limit})
    return await cursor.fetchall()


async def claim_due(conn: Conn, limit: int) -> list[DictRow]:
    """Claim up to ``limit`` due operations for the caller's transaction (their conversations
    locked): ``conversation_id``, ``operation_id`` and the start call's ``traceparent`` and
    ``tracestate``."""
    cursor = await conn.execute(CLAIM_DUE, {"limit": limit})
    return await cursor.fetchall()


async def settle_claimed(
    conn: Conn, claimed: list[DictRow], traceparent: str | None, tracestate: str | None
) -> list[DictRow]:
    """Settle what :func:`claim_due` claimed in this transaction; the outbox rows carry the trace
    context given (None: each its start call's)."""
    params = {
        "conversation_ids": [row["conversation_id"] for row in claimed],
        "operation_ids": [row["operation_id"] for row in claimed],
        "traceparent": traceparent,
        "tracestate": tracestate,
    }
    cursor = await conn.execute(SETTLE_CLAIMED, params)
    return await cursor.fetchall()


async def due_conversations_traced(conn: Conn, limit: int) -> list[DictRow]:
    """:func:`due_conversations` with each one's due operations (``operation_ids``) and their start
    calls' trace contexts (``traceparents``, ``tracestates``, in the same order)."""
    cursor = await conn.execute(DUE_CONVERSATIONS_TRACED, {"limit": limit})
    return await cursor.fetchall()


async def settle_due_in_traced(
    conn: Conn, conversation_id: str, traceparent: str | None, tracestate: str | None
) -> list[DictRow]:
    """:func:`settle_due_in`, its outbox rows carrying the trace context given."""
    params = (conversation_id, traceparent, tracestate)
    cursor = await conn.execute(SETTLE_DUE_IN_TRACED, params, prepare=True)
    return await cursor.fetchall()


async def due_conversations(conn: Conn, limit: int) -> list[str]:
    """Conversations with an operation past its deadline, the most overdue first (no lock taken)."""
    cursor = await conn.execute(DUE_CONVERSATIONS, {"limit": limit})
    return [str(row["conversation_id"]) for row in await cursor.fetchall()]


async def settle_due_in(conn: Conn, conversation_id: str) -> list[DictRow]:
    """What is due in the conversation, settled unless another holds its lock (then nothing)."""
    cursor = await conn.execute(SETTLE_DUE_IN, (conversation_id,), prepare=True)
    return await cursor.fetchall()


async def focusing_in_conversation(conn: Conn, conversation_id: str) -> list[DictRow]:
    """The conversation's focusing operations, of every app, the earliest started first."""
    cursor = await conn.execute(FOCUSING_IN_CONVERSATION, {"conversation_id": conversation_id})
    return await cursor.fetchall()


async def focusing_for_instance(conn: Conn, instance_id: UUID, conversation_id: str) -> DictRow | None:
    params = {"instance_id": instance_id, "conversation_id": conversation_id}
    cursor = await conn.execute(FOCUSING_FOR_INSTANCE, params)
    return await cursor.fetchone()


async def latest_for_instance(conn: Conn, instance_id: UUID, conversation_id: str) -> DictRow | None:
    params = {"instance_id": instance_id, "conversation_id": conversation_id}
    cursor = await conn.execute(LATEST_FOR_INSTANCE, params)
    return await cursor.fetchone()


async def get_by_id(conn: Conn, operation_id: UUID, conversation_id: str | None = None) -> DictRow | None:
    """The operation; with ``conversation_id``, only if it is that conversation's."""
    if conversation_id is None:
        cursor = await conn.execute(GET_BY_ID, {"operation_id": operation_id})
    else:
        params = {"operation_id": operation_id, "conversation_id": conversation_id}
        cursor = await conn.execute(GET_IN_CONVERSATION, params)
    return await cursor.fetchone()


async def get_by_id_with_clock(
    conn: Conn, operation_id: UUID, conversation_id: str | None = None
) -> DictRow | None:
    """:func:`get_by_id` and the database clock (``server_now``) it was read at."""
    if conversation_id is None:
        cursor = await conn.execute(GET_BY_ID_WITH_CLOCK, {"operation_id": operation_id})
    else:
        params = {"operation_id": operation_id, "conversation_id": conversation_id}
        cursor = await conn.execute(GET_IN_CONVERSATION_WITH_CLOCK, params)
    return await cursor.fetchone()


async def interrupt_one(
    conn: Conn, operation_id: UUID, conversation_id: str | None, reason: str = "agent_interrupt"
) -> DictRow | None:
    """``event_id`` is set when this statement settled the operation (``state`` says how);
    ``reason``: the interrupt's (``agent_interrupt``, or ``person_interrupt`` for a person's)."""
    cursor = await conn.execute(
        INTERRUPT_ONE,
        {"operation_id": operation_id, "conversation_id": conversation_id, "reason": reason},
        prepare=True,
    )
    return await cursor.fetchone()


async def seconds_until_next_deadline(conn: Conn) -> float | None:
    cursor = await conn.execute(SECONDS_UNTIL_NEXT_DEADLINE)
    row = await cursor.fetchone()
    return None if row is None or row["seconds"] is None else float(row["seconds"])

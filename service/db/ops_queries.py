"""Named statements for operators: what the outbox, the operations and the deliveries look like.

Every read is a ``Lookup``: named statements and their parameters, run in one read-only snapshot
(``read``); it answers their rows by name. The ops API and the CLI alike read through
``service.use_cases.ops_reads``, which pairs each with its view (``service.use_cases.ops_views``):
the rows are formatted there, once. The writes are in ``service.db.requeue``, ``recovery`` and
``delivery``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypedDict, Unpack
from uuid import UUID

from psycopg import AsyncConnection
from psycopg.rows import DictRow

from service.db.tables import OPERATION_STATES, OUTBOX_STATUSES
from service.domain.cursors import OutboxCursor

Rows = dict[str, list[DictRow]]


DEFAULT_LIMIT = 100

# Several statements of one lookup see one snapshot: a row and its attempts always agree.
SNAPSHOT = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"

OUTBOX_COLUMNS = """
    b.event_id, b.operation_id, b.tool, b.tool_call_id, b.conversation_id, b.sequence, b.status,
    b.attempts, b.next_attempt_at, b.last_error, b.created_at, b.delivered_at, b.lease_owner,
    b.lease_expires_at"""

ATTEMPT_COLUMNS = """
    a.attempt, a.relay_id, a.started_at, a.duration_ms, a.status_code, a.error_class,
    a.response_excerpt, a.outcome"""

OPERATION_COLUMNS = """
    o.operation_id, o.tool, o.tool_call_id, o.conversation_id, o.app_scope, o.instance_id, o.state,
    o.reason, o.activity, o.duration_seconds, o.started_at, o.ends_at, o.finalized_at, o.lateness_ms"""

OUTBOX_LIST = f"""
SELECT {OUTBOX_COLUMNS}
FROM outbox b
WHERE (%(status)s::text IS NULL OR b.status = %(status)s)
  AND (%(conversation_id)s::text IS NULL OR b.conversation_id = %(conversation_id)s)
  AND (%(tool_call_prefix)s::text IS NULL OR starts_with(b.tool_call_id, %(tool_call_prefix)s))
  AND (%(after_created_at)s::timestamptz IS NULL OR b.created_at < %(after_created_at)s
       OR (b.created_at = %(after_created_at)s AND (b.conversation_id > %(after_conversation_id)s
           OR (b.conversation_id = %(after_conversation_id)s AND b.sequence < %(after_sequence)s))))
ORDER BY b.created_at DESC, b.conversation_id, b.sequence DESC
LIMIT %(limit)s + 1
"""

# The event ids that begin with an operator's abbreviation, found as a range of the primary key
# (uuids order as their hex digits do): two at most, enough to tell unique from ambiguous.
EVENT_IDS_IN_RANGE = """
SELECT event_id FROM outbox
WHERE event_id BETWEEN %(lowest)s AND %(highest)s
ORDER BY event_id
LIMIT 2
"""

# Recorded tool calls of the last minutes, newest first: every call the Agent made that was
# answered, interrupts and refusals included (ix_tool_calls_created_at, a BRIN index, finds them).
TOOL_CALLS_LIST = """
SELECT t.tool_call_id, t.conversation_id, t.tool, t.outcome, t.created_at
FROM tool_calls t
WHERE t.created_at >= now() - make_interval(mins => %(minutes)s)
  AND (%(tool)s::text IS NULL OR t.tool = %(tool)s)
  AND (%(conversation_id)s::text IS NULL OR t.conversation_id = %(conversation_id)s)
ORDER BY t.created_at DESC, t.tool_call_id
LIMIT %(limit)s
"""

# The recorded tool calls whose id begins with an operator's abbreviation (as a list shortens it):
# two at most, enough to tell unique from ambiguous.
TOOL_CALL_IDS_WITH_PREFIX = """
SELECT DISTINCT tool_call_id FROM tool_calls
WHERE starts_with(tool_call_id, %(prefix)s)
ORDER BY tool_call_id
LIMIT 2
"""

OUTBOX_GET = f"""
SELECT {OUTBOX_COLUMNS}, b.payload
FROM outbox b
WHERE b.event_id = %(event_id)s
"""

# Ordered by attempt number, then by insertion, so the history reads in the order it happened.
OUTBOX_ATTEMPTS = f"""
SELECT {ATTEMPT_COLUMNS}
FROM outbox_attempts a
WHERE a.event_id = %(event_id)s
ORDER BY a.attempt, a.attempt_id
"""

OPERATIONS_LIST = f"""
SELECT {OPERATION_COLUMNS}
FROM operations o
WHERE (%(state)s::text IS NULL OR o.state = %(state)s)
  AND (%(conversation_id)s::text IS NULL OR o.conversation_id = %(conversation_id)s)
ORDER BY o.started_at DESC, o.operation_id
LIMIT %(limit)s
"""

# Pending and dead rows counted through the indexes that hold them (the backlog, never the
# history); delivered ones from the tally the relays keep as they record deliveries.
STATS_OUTBOX = """
SELECT (SELECT count(*) FROM outbox WHERE status = 'pending') AS pending,
       (SELECT coalesce(sum(delivered), 0) FROM outbox_tallies)::bigint AS delivered,
       (SELECT count(*) FROM outbox WHERE status = 'dead') AS dead,
       (SELECT count(*) FROM outbox WHERE status = 'pending' AND next_attempt_at <= now()) AS due_now,
       round(EXTRACT(EPOCH FROM now() - (SELECT min(created_at) FROM outbox WHERE status = 'pending')),
             3)::float8 AS oldest_pending_age_seconds,
       now() AS server_time
"""

# lateness_ms is kept for every deadline decision, i.e. for every completed operation.
STATS_OPERATIONS = """
SELECT count(*) FILTER (WHERE state = 'focusing') AS focusing,
       count(*) FILTER (WHERE state = 'completed') AS completed,
       count(*) FILTER (WHERE state = 'interrupted') AS interrupted,
       count(*) FILTER (WHERE state = 'cancelled') AS cancelled,
       count(*) FILTER (WHERE state = 'failed') AS failed,
       percentile_disc(0.5) WITHIN GROUP (ORDER BY lateness_ms)
           FILTER (WHERE state = 'completed') AS lateness_p50_ms,
       percentile_disc(0.99) WITHIN GROUP (ORDER BY lateness_ms)
           FILTER (WHERE state = 'completed') AS lateness_p99_ms,
       max(lateness_ms) FILTER (WHERE state = 'completed') AS lateness_max_ms
FROM operations
"""

# History retention: what the last replica to prune reported (none yet: NULLs), and the oldest row
# kept of each kind it removes, each the first entry of an index (no scan of the history).
STATS_HISTORY = """
SELECT r.retention_days, r.reported_by, r.reported_at, r.last_pruned_at, r.last_pruned, r.total_pruned,
       h.oldest_operation_at, h.oldest_answer_at, h.oldest_message_at
FROM (VALUES (true)) AS one(id)
LEFT JOIN history_retention r ON r.id = one.id
CROSS JOIN history_oldest h
"""

STATS_ATTEMPTS = """
SELECT outcome, count(*) AS attempts
FROM outbox_attempts
WHERE started_at > now() - interval '1 hour'
GROUP BY outcome
"""

# "What happened to tool call X?" The call's recorded answer; the operation it started, or the one
# its answer names (an interrupt names the operation it ended); the outbox rows of those calls.
# Outbox rows are found through their tool_call_id, so every step is an index lookup. A tool_call_id
# is unique per conversation: %(conversation_id)s names one, or NULL reads every conversation's
# (the view refuses more than one as ambiguous). The answer's traceparent (migration 0026) names the
# trace of the call that recorded it (NULL: not traced).
_TRACE_SCOPE = """
WITH answer AS (
    SELECT t.tool_call_id, t.conversation_id, t.tool, t.response, t.created_at, t.outcome, t.traceparent
    FROM tool_calls t
    WHERE t.tool_call_id = %(tool_call_id)s
      AND (%(conversation_id)s::text IS NULL OR t.conversation_id = %(conversation_id)s)
),
named_operation AS (
    SELECT CASE WHEN response->>'operation_id'
                     ~ '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$'
                THEN (response->>'operation_id')::uuid END AS operation_id
    FROM answer
),
traced_operations AS (
    SELECT o.*
    FROM operations o
    WHERE (o.tool_call_id = %(tool_call_id)s
           AND (%(conversation_id)s::text IS NULL OR o.conversation_id = %(conversation_id)s))
       OR o.operation_id IN (SELECT operation_id FROM named_operation)
),
traced_outbox AS (
    SELECT b.*
    FROM outbox b
    WHERE b.tool_call_id IN (SELECT %(tool_call_id)s::text UNION SELECT tool_call_id FROM traced_operations)
      AND (%(conversation_id)s::text IS NULL OR b.conversation_id = %(conversation_id)s)
)
"""

TRACE_ANSWER = _TRACE_SCOPE + "SELECT * FROM answer"

TRACE_OPERATIONS = (
    _TRACE_SCOPE
    + f"""
SELECT {OPERATION_COLUMNS}, o.result
FROM traced_operations o
ORDER BY o.started_at, o.operation_id
"""
)

TRACE_OUTBOX = (
    _TRACE_SCOPE
    + f"""
SELECT {OUTBOX_COLUMNS}, b.payload
FROM traced_outbox b
ORDER BY b.created_at, b.event_id
"""
)

TRACE_ATTEMPTS = (
    _TRACE_SCOPE
    + f"""
SELECT a.event_id, {ATTEMPT_COLUMNS}
FROM outbox_attempts a
JOIN traced_outbox b ON b.event_id = a.event_id AND b.conversation_id = a.conversation_id
ORDER BY a.event_id, a.attempt, a.attempt_id
"""
)


@dataclass(frozen=True)
class Lookup:
    """Named statements read in one snapshot, with their parameters."""

    statements: tuple[tuple[str, str], ...]
    params: Mapping[str, object]

    def __add__(self, other: Lookup) -> Lookup:
        """Both lookups' statements in one snapshot (their names and parameters kept apart)."""
        return Lookup(self.statements + other.statements, {**self.params, **other.params})


async def read(conn: AsyncConnection[DictRow], lookup: Lookup) -> Rows:
    rows: Rows = {}
    async with conn.transaction():
        await conn.execute(SNAPSHOT)
        for name, sql in lookup.statements:
            cursor = await conn.execute(sql, lookup.params)
            rows[name] = await cursor.fetchall()
    return rows


class OutboxFilter(TypedDict, total=False):
    """Which outbox rows a list shows (the ops API's and the CLI's filters, named once)."""

    status: str | None  # one of OUTBOX_STATUSES
    conversation_id: str | None
    tool_call_prefix: str | None  # tool calls whose id begins with it
    limit: int  # DEFAULT_LIMIT
    after: OutboxCursor | None  # from the row after it on


def outbox_list(**only: Unpack[OutboxFilter]) -> Lookup:
    """Outbox rows (``outbox``), newest first, optionally of one status, one conversation, and tool
    calls whose id begins with ``tool_call_prefix``; from the row after ``after`` on; one row more
    than ``limit`` when more follow."""
    status, after = only.get("status"), only.get("after")
    if status is not None and status not in OUTBOX_STATUSES:
        raise ValueError(f"status must be one of {', '.join(OUTBOX_STATUSES)}")
    return Lookup(
        (("outbox", OUTBOX_LIST),),
        {
            "status": status,
            "conversation_id": only.get("conversation_id"),
            "tool_call_prefix": only.get("tool_call_prefix"),
            "limit": only.get("limit", DEFAULT_LIMIT),
            "after_created_at": after and after.created_at,
            "after_conversation_id": after and after.conversation_id,
            "after_sequence": after and after.sequence,
        },
    )


async def event_ids_with_prefix(conn: AsyncConnection[DictRow], hex_prefix: str) -> list[UUID]:
    """At most two event ids whose hex digits begin with ``hex_prefix`` (1-32 hex digits)."""
    digits = hex_prefix.lower()
    if not 1 <= len(digits) <= 32 or any(c not in "0123456789abcdef" for c in digits):
        raise ValueError("an event id prefix is 1-32 hex digits")
    lowest = UUID(digits.ljust(32, "0"))
    highest = UUID(digits.ljust(32, "f"))
    cursor = await conn.execute(EVENT_IDS_IN_RANGE, {"lowest": lowest, "highest": highest})
    rows = await cursor.fetchall()
    return [row["event_id"] for row in rows]


def tool_calls_list(
    *,
    minutes: int = 60,
    tool: str | None = None,
    conversation_id: str | None = None,
    limit: int = DEFAULT_LIMIT,
) -> Lookup:
    """The tool calls (``tool_calls``) answered in the last ``minutes``, newest first, optionally of
    one tool and one conversation; ``outcome`` is the answer's status (or its error code)."""
    return Lookup(
        (("tool_calls", TOOL_CALLS_LIST),),
        {"minutes": minutes, "tool": tool, "conversation_id": conversation_id, "limit": limit},
    )


async def tool_call_ids_with_prefix(conn: AsyncConnection[DictRow], prefix: str) -> list[str]:
    """At most two recorded tool call ids that begin with ``prefix``."""
    cursor = await conn.execute(TOOL_CALL_IDS_WITH_PREFIX, {"prefix": prefix})
    rows = await cursor.fetchall()
    return [row["tool_call_id"] for row in rows]


def outbox_show(event_id: UUID) -> Lookup:
    """One outbox row with its payload (``row``, none for an unknown event) and every delivery
    attempt (``attempts``)."""
    return Lookup((("row", OUTBOX_GET), ("attempts", OUTBOX_ATTEMPTS)), {"event_id": event_id})


def operations_list(
    *, state: str | None = None, conversation_id: str | None = None, limit: int = DEFAULT_LIMIT
) -> Lookup:
    """Operations (``operations``), newest first, optionally in one state and one conversation."""
    if state is not None and state not in OPERATION_STATES:
        raise ValueError(f"state must be one of {', '.join(OPERATION_STATES)}")
    return Lookup(
        (("operations", OPERATIONS_LIST),),
        {"state": state, "conversation_id": conversation_id, "limit": limit},
    )


def stats() -> Lookup:
    """Outbox by status and its oldest pending age (``outbox``), operations by state and deadline
    lateness over completed operations (``operations``), delivery attempts by outcome over the
    last hour (``attempts``), and history retention with the oldest rows kept (``history``)."""
    statements = (
        ("outbox", STATS_OUTBOX),
        ("operations", STATS_OPERATIONS),
        ("attempts", STATS_ATTEMPTS),
        ("history", STATS_HISTORY),
    )
    return Lookup(statements, {})


def trace_tool_call(tool_call_id: str, conversation_id: str | None = None) -> Lookup:
    """What happened to one tool call (of ``conversation_id``, or of every conversation that has
    one by that id): its recorded answer (``answer``), its operation(s) (``operations``), the outbox
    rows (``outbox``) and every delivery attempt (``attempts``)."""
    statements = (
        ("answer", TRACE_ANSWER),
        ("operations", TRACE_OPERATIONS),
        ("outbox", TRACE_OUTBOX),
        ("attempts", TRACE_ATTEMPTS),
    )
    return Lookup(statements, {"tool_call_id": tool_call_id, "conversation_id": conversation_id})

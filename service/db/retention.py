"""History retention's statements: one bounded batch each (the functions of
``service/db/sql/97_retention.sql``), the advisory lock a batch holds, and the report row."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import DictRow
from psycopg.types.json import Jsonb

Conn = AsyncConnection[DictRow]

# One replica prunes at a time: a batch takes this lock for its own transaction only, and a replica
# that does not get it leaves the round to the one that did.
TRY_LOCK = "SELECT pg_try_advisory_xact_lock(hashtext('lineup.history_retention')) AS locked"

KEYSET = {
    "operations": "SELECT * FROM prune_operations(%(cutoff)s, %(limit)s, %(after)s)",
    "instances": "SELECT * FROM prune_instances(%(cutoff)s, %(limit)s, %(after)s)",
}
OLDEST_FIRST = {
    "tool_call_answers": (
        "SELECT expired AS removed, examined FROM expire_tool_call_answers(%(cutoff)s, %(limit)s)"
    ),
    "messages": "SELECT * FROM prune_messages(%(cutoff)s, %(limit)s)",
    "surface_events": "SELECT * FROM prune_surface_events(%(cutoff)s, %(limit)s)",
    "interactions": "SELECT * FROM prune_interactions(%(cutoff)s, %(limit)s)",
}
#: The order of a round: operations before their instances; the leaves (by age) after.
KINDS = ("operations", "instances", "tool_call_answers", "messages", "surface_events", "interactions")

REPORT = """
INSERT INTO history_retention AS r (id, retention_days, reported_by, reported_at, last_pruned_at,
                                    last_pruned, total_pruned)
VALUES (true, %(days)s, %(by)s, now(), now(), %(pruned)s, %(total)s)
ON CONFLICT (id) DO UPDATE
SET retention_days = excluded.retention_days, reported_by = excluded.reported_by,
    reported_at = excluded.reported_at, last_pruned_at = excluded.last_pruned_at,
    last_pruned = excluded.last_pruned, total_pruned = r.total_pruned + excluded.total_pruned
"""


@dataclass(frozen=True, slots=True)
class Batch:
    removed: int
    examined: int
    last_id: uuid.UUID | None = None


async def try_lock(conn: Conn) -> bool:
    row = await (await conn.execute(TRY_LOCK)).fetchone()
    return bool(row and row["locked"])


async def batch(conn: Conn, kind: str, cutoff: datetime, limit: int, after: uuid.UUID | None = None) -> Batch:
    params: dict[str, Any] = {"cutoff": cutoff, "limit": limit, "after": after}
    statement = KEYSET.get(kind) or OLDEST_FIRST[kind]
    row = await (await conn.execute(statement, params)).fetchone()
    assert row is not None
    return Batch(row["removed"] or 0, row["examined"] or 0, row.get("last_id"))


async def report(conn: Conn, days: int, by: str, pruned: dict[str, int]) -> None:
    await conn.execute(
        REPORT, {"days": days, "by": by, "pruned": Jsonb(pruned), "total": sum(pruned.values())}
    )


# On Citus, where a batch over every shard cannot lock rows (FOR UPDATE ... SKIP LOCKED stays in one
# shard): conversations with history older than the cutoff (read on every shard, none of ``seen``),
# each pruned whole by ``prune_conversation`` (97_retention.sql), a call delegated to its worker.
CONVERSATIONS_WITH_HISTORY = """
SELECT DISTINCT conversation_id FROM (
    (SELECT conversation_id FROM tool_calls
     WHERE outcome <> 'tool_call_expired' AND created_at < %(cutoff)s
       AND NOT (conversation_id = ANY(%(seen)s))
     LIMIT %(limit)s)
    UNION ALL
    (SELECT conversation_id FROM app_instances
     WHERE status = 'closed' AND closed_at < %(cutoff)s AND NOT (conversation_id = ANY(%(seen)s))
     LIMIT %(limit)s)
    UNION ALL
    (SELECT conversation_id FROM messages
     WHERE created_at < %(cutoff)s AND NOT (conversation_id = ANY(%(seen)s))
     LIMIT %(limit)s)
    UNION ALL
    (SELECT conversation_id FROM surface_events
     WHERE created_at < %(cutoff)s AND NOT (conversation_id = ANY(%(seen)s))
     LIMIT %(limit)s)
) candidates
"""
PRUNE_CONVERSATION = "SELECT kind, removed FROM prune_conversation(%s, %s)"
# A round of one replica at a time, held for the round on the coordinator (session level).
TRY_ROUND_LOCK = "SELECT pg_try_advisory_lock(hashtext('lineup.history_retention')) AS locked"
ROUND_UNLOCK = "SELECT pg_advisory_unlock(hashtext('lineup.history_retention'))"


async def conversations_with_history(conn: Conn, cutoff: datetime, limit: int, seen: list[str]) -> list[str]:
    params = {"cutoff": cutoff, "limit": limit, "seen": seen}
    return [
        row["conversation_id"]
        for row in await (await conn.execute(CONVERSATIONS_WITH_HISTORY, params)).fetchall()
    ]


async def prune_conversation(conn: Conn, conversation_id: str, cutoff: datetime) -> dict[str, int]:
    """The conversation's history older than ``cutoff``, removed; rows per kind (none: it was busy)."""
    cursor = await conn.execute(PRUNE_CONVERSATION, (conversation_id, cutoff), prepare=True)
    return {row["kind"]: int(row["removed"]) for row in await cursor.fetchall()}

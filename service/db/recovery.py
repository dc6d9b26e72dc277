"""Bulk recovery: dead outbox rows back to the queue by filter, in bounded batches
(``ops outbox recover``, ``POST /v1/ops/outbox/recover``; ``ops outbox requeue --all-dead``).

The single requeue's rule for every row (``service.db.requeue``): the same ``event_id``, attempts
back to 0, due now, no lease, ``last_error`` kept. Batches follow each conversation's order —
keyset pagination over ``(conversation_id, sequence)`` on the partial index of dead rows — so a
conversation's lower sequence is back before its higher one, and a batch is one short transaction:
a million-row recovery never holds the table, and the relays start on the first batch (woken after
each commit) while the next are requeued. A dry run counts what would be requeued and changes
nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import DictRow

from service.db.ops_queries import OUTBOX_COLUMNS

BATCH = 1000

_MATCHING = """
b.status = 'dead'
AND (%(since)s::timestamptz IS NULL OR b.created_at >= %(since)s)
AND (%(until)s::timestamptz IS NULL OR b.created_at < %(until)s)
AND (%(conversation_id)s::text IS NULL OR b.conversation_id = %(conversation_id)s)
AND (%(tool)s::text IS NULL OR b.tool = %(tool)s)
AND (%(last_error_prefix)s::text IS NULL OR starts_with(b.last_error, %(last_error_prefix)s))
"""

COUNT_DEAD = f"SELECT count(*) AS matched FROM outbox b WHERE {_MATCHING}"

#: The requeue's rule, for one row (``service.db.requeue``) and for a batch: as the row was first
#: written — the same event_id, attempts 0, due now, no lease. ``last_error`` is kept: it says why
#: the row died until the next attempt replaces it; every earlier attempt stays in outbox_attempts.
REQUEUED = (
    "status = 'pending', attempts = 0, next_attempt_at = now(), lease_owner = NULL, lease_expires_at = NULL"
)

REQUEUE_BATCH = f"""
WITH batch AS (
    SELECT b.event_id
    FROM outbox b
    WHERE {_MATCHING}
      AND (b.conversation_id, b.sequence) > (%(after_conversation_id)s, %(after_sequence)s)
    ORDER BY b.conversation_id, b.sequence
    LIMIT %(batch)s
    FOR UPDATE SKIP LOCKED
)
UPDATE outbox b
SET {REQUEUED}
FROM batch
WHERE b.event_id = batch.event_id
RETURNING {OUTBOX_COLUMNS}
"""


@dataclass(frozen=True)
class DeadFilter:
    """Which dead rows: created in [since, until), of a conversation, of a tool, whose last error
    begins with a prefix. Nothing set: every dead row."""

    since: datetime | None = None
    until: datetime | None = None
    conversation_id: str | None = None
    tool: str | None = None
    last_error_prefix: str | None = None

    def params(self) -> dict[str, Any]:
        return {
            "since": self.since,
            "until": self.until,
            "conversation_id": self.conversation_id,
            "tool": self.tool,
            "last_error_prefix": self.last_error_prefix,
        }


@dataclass
class Recovery:
    """How a recovery went: ``matched`` when it started, ``requeued`` since; ``rows`` kept only
    when asked for (``--all-dead`` prints each)."""

    matched: int = 0
    requeued: int = 0
    rows: list[DictRow] = field(default_factory=list)

    def answer(self) -> dict[str, int]:
        return {"matched": self.matched, "requeued": self.requeued}


class _Batches:
    """The keyset of the next batch and the bookkeeping after each."""

    def __init__(self, which: DeadFilter, recovery: Recovery, keep_rows: bool, batch: int) -> None:
        self.which = which
        self.recovery = recovery
        self.keep_rows = keep_rows
        self.batch = batch
        self.after: tuple[str, int] = ("", -1)

    def params(self) -> dict[str, Any]:
        return {
            **self.which.params(),
            "after_conversation_id": self.after[0],
            "after_sequence": self.after[1],
            "batch": self.batch,
        }

    def took(self, rows: list[DictRow]) -> bool:
        """Record a committed batch; whether another may follow."""
        if rows:
            last = max(rows, key=lambda row: (row["conversation_id"], row["sequence"]))
            self.after = (last["conversation_id"], last["sequence"])
            self.recovery.requeued += len(rows)
            if self.keep_rows:
                self.recovery.rows.extend(rows)
        return len(rows) == self.batch


async def recover(
    conn: AsyncConnection[DictRow],
    which: DeadFilter,
    *,
    dry_run: bool = False,
    keep_rows: bool = False,
    batch: int = BATCH,
    committed: Callable[[], None] | None = None,
) -> Recovery:
    """Requeue the matching dead rows (or, ``dry_run``, only count them); ``committed()`` is called
    after each batch that requeued rows (the after-commit wake-up of the relays)."""
    found = await (await conn.execute(COUNT_DEAD, which.params())).fetchone()
    recovery = Recovery(matched=int(found["matched"]) if found else 0)
    if dry_run or not recovery.matched:
        return recovery
    batches = _Batches(which, recovery, keep_rows, batch)
    more = True
    while more:
        async with conn.transaction():
            rows = await (await conn.execute(REQUEUE_BATCH, batches.params())).fetchall()
        if rows and committed is not None:
            committed()
        more = batches.took(rows)
    return recovery

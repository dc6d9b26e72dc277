"""Named statements of the write limits (``spend_write``, ``service/db/sql/45_limits.sql``)."""

from __future__ import annotations

from collections.abc import Sequence

from psycopg import AsyncConnection
from psycopg.rows import DictRow

Conn = AsyncConnection[DictRow]

SPEND = """
SELECT spend_write(%(principals)s::text[], %(kind)s, %(bytes)s, %(window)s, %(max_writes)s, %(max_bytes)s)
    AS retry_in
"""

# Allowances whose window has ended count for nothing (spend_write starts a new window over them):
# removed in batches, so the table holds the principals that wrote in the current window only.
PRUNE_ENDED = """
DELETE FROM write_allowances
WHERE (principal, kind) IN (
    SELECT principal, kind FROM write_allowances
    WHERE window_start < statement_timestamp() - make_interval(secs => %(window)s)
    LIMIT 1000
    FOR UPDATE SKIP LOCKED)
"""


async def spend(
    conn: Conn,
    principals: Sequence[str],
    kind: str,
    nbytes: int,
    *,
    window: int,
    max_writes: int,
    max_bytes: int,
) -> float | None:
    """Seconds until the window ends when a principal is over its allowance (the write must be
    refused and its transaction rolled back), else None: counted."""
    cursor = await conn.execute(
        SPEND,
        {
            "principals": list(principals),
            "kind": kind,
            "bytes": nbytes,
            "window": window,
            "max_writes": max_writes,
            "max_bytes": max_bytes,
        },
    )
    row = await cursor.fetchone()
    assert row is not None
    retry_in: float | None = row["retry_in"]
    return retry_in


async def prune_ended(conn: Conn, window: int) -> int:
    """Remove a batch of allowances whose ``window``-second window has ended; how many went."""
    cursor = await conn.execute(PRUNE_ENDED, {"window": window})
    return cursor.rowcount

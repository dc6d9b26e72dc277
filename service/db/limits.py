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

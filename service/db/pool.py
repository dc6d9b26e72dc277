"""The connection pool; created by the process that serves, never at import time."""

from __future__ import annotations

from psycopg import AsyncConnection
from psycopg.rows import DictRow, dict_row
from psycopg_pool import AsyncConnectionPool

Pool = AsyncConnectionPool[AsyncConnection[DictRow]]


async def _configure(conn: AsyncConnection[DictRow]) -> None:
    # Times leave the database as UTC whatever the server's default is.
    await conn.execute("SET TIME ZONE 'UTC'")


async def open_pool(url: str, *, size: int = 10, name: str = "lineup") -> Pool:
    pool: Pool = AsyncConnectionPool(
        url,
        min_size=min(2, size),
        max_size=size,
        # Autocommit: a single statement (a tool call) is its own transaction, with no BEGIN or
        # COMMIT round trips; use cases that need more open one with ``conn.transaction()``.
        kwargs={"row_factory": dict_row, "autocommit": True, "application_name": name},
        configure=_configure,
        connection_class=AsyncConnection[DictRow],
        open=False,
        # No check on checkout (it costs a round trip per request): a connection broken by a
        # database restart fails its transaction, which the tool-call path retries, and the
        # pool replaces it.
        max_idle=300,
    )
    await pool.open(wait=True, timeout=30)
    return pool

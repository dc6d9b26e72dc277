"""The relay's connections: a small autocommit pool, opened by the running relay, never at import."""

from __future__ import annotations

from psycopg import AsyncConnection
from psycopg.rows import TupleRow
from psycopg_pool import AsyncConnectionPool

from service.db.pool import RecoveringPool, prepare_options
from service.db.reconnect import PatientConnection

RelayPool = AsyncConnectionPool[AsyncConnection[TupleRow]]
APPLICATION_NAME = "lineup-relay"


async def _configure(conn: AsyncConnection[TupleRow]) -> None:
    await conn.execute("SET TIME ZONE 'UTC'")


def relay_pool(url: str, *, size: int = 4, prepared: bool = True) -> RelayPool:
    """Not opened yet. No check on checkout: a connection that died (a restart, a failover,
    ``pg_terminate_backend``) fails its next statement, the pool then drops every dead connection
    (``RecoveringPool``), and the caller retries on a new one, made on the primary of the moment."""
    return RecoveringPool(
        url,
        min_size=1,
        max_size=size,
        kwargs={"autocommit": True, "application_name": APPLICATION_NAME, **prepare_options(prepared)},
        configure=_configure,
        connection_class=PatientConnection[TupleRow],
        open=False,
        timeout=10,
        name="lineup-relay",
    )

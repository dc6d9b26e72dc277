"""The connection pool; created by the process that serves, never at import time."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import psycopg
import structlog
from prometheus_client import Counter
from psycopg import AsyncConnection
from psycopg.rows import DictRow, dict_row
from psycopg_pool import AsyncConnectionPool

from service.db.reconnect import PatientConnection

log = structlog.get_logger("service.db.pool")
DISCARDED = Counter(
    "lineup_db_connections_discarded_total",
    "Pooled connections closed after a failed statement instead of being reused (on Citus only).",
)

Pool = AsyncConnectionPool[AsyncConnection[DictRow]]
ACT = TypeVar("ACT", bound=AsyncConnection[Any])
# How long a request waits for a connection: through a failover (seconds) it waits and then commits;
# through a longer outage the tool-call path's retries end in a 503 with Retry-After, not a hang.
CHECKOUT_TIMEOUT = 6.0


class RecoveringPool(AsyncConnectionPool[ACT]):
    """A pool that drops every dead connection as soon as one is found dead.

    There is no check on checkout (it would cost a round trip per request). When a restart or a
    failover kills the database's connections, they are all dead at once, but each would otherwise
    be found only by the request that draws it, and fail that request. So the first statement that
    fails on a broken connection makes the pool test its idle connections (``check()``: an empty
    query each, answered at once by a live server) before the error reaches its caller, whose
    retry then waits for a fresh connection — made through ``PatientConnection``, which finds the
    new primary — instead of drawing the next dead one.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._sweep: asyncio.Future[None] | None = None
        self.sweeps = 0
        #: On Citus: close every connection one of whose statements failed (``discard_after_error``).
        self.discard_after_error = False
        self.discarded = 0

    @asynccontextmanager
    async def connection(self, timeout: float | None = None) -> AsyncIterator[ACT]:  # noqa: ASYNC109
        async with super().connection(timeout) as conn:
            try:
                yield conn
            except psycopg.Error as error:
                if self.discard_after_error and not conn.closed:
                    await self._discard(conn, error)
                if isinstance(error, psycopg.OperationalError) and conn.broken:
                    await self.drop_dead_connections()
                raise

    async def _discard(self, conn: ACT, error: psycopg.Error) -> None:
        """Citus 13 leaves a backend unable to delegate a function call ever again once an error was
        raised while it planned a statement recursively (a counter of its planner is never brought
        back to 0; every later call then runs statement by statement from the coordinator, a round
        trip each, with only a DEBUG line to show it). Which error did that cannot be told from
        here, so any failed statement costs its connection: closed, and the pool makes a new one."""
        self.discarded += 1
        DISCARDED.inc()
        log.info("connection_discarded", reason="citus", error_type=type(error).__name__)
        await conn.close()

    async def drop_dead_connections(self) -> None:
        """Test the idle connections, replace the dead ones; callers at the same time share one test."""
        if self._sweep is None or self._sweep.done():
            self.sweeps += 1
            self._sweep = asyncio.ensure_future(self.check())
        await asyncio.shield(self._sweep)


async def _configure(conn: AsyncConnection[DictRow]) -> None:
    # Times leave the database as UTC whatever the server's default is.
    await conn.execute("SET TIME ZONE 'UTC'")


def prepare_options(prepared: bool = True) -> dict[str, Any]:
    """Connection options for ``DB_PREPARED_STATEMENTS``: off, ``prepare_threshold=None``, which
    psycopg reads as "never prepare" — neither automatically (after 5 runs of a statement) nor
    where a call site asks for it (``prepare=True``): every statement is then sent unnamed
    (parse, bind and execute in one message), which a pooler in transaction mode can carry."""
    return {} if prepared else {"prepare_threshold": None}


async def open_pool(url: str, *, size: int = 10, name: str = "lineup", prepared: bool = True) -> Pool:
    pool: Pool = RecoveringPool(
        url,
        min_size=min(2, size),
        max_size=size,
        # Autocommit: a single statement (a tool call) is its own transaction, with no BEGIN or
        # COMMIT round trips; use cases that need more open one with ``conn.transaction()``.
        kwargs={
            "row_factory": dict_row,
            "autocommit": True,
            "application_name": name,
            **prepare_options(prepared),
        },
        configure=_configure,
        connection_class=PatientConnection[DictRow],
        open=False,
        timeout=CHECKOUT_TIMEOUT,
        # No check on checkout (it costs a round trip per request): a connection broken by a
        # database restart or failover fails its statement, the pool then drops every dead
        # connection at once (``RecoveringPool``), and the tool-call path retries.
        max_idle=300,
    )
    await pool.open(wait=True, timeout=30)
    return pool

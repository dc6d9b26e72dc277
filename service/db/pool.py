"""The connection pool; created by the process that serves, never at import time."""

from __future__ import annotations

import asyncio
from time import monotonic
from types import TracebackType
from typing import Any, Generic, TypeVar

import psycopg
import psycopg_pool
import structlog
from prometheus_client import Counter
from psycopg import AsyncConnection
from psycopg.pq import TransactionStatus
from psycopg.rows import DictRow, dict_row, tuple_row
from psycopg_pool import AsyncConnectionPool

from service.db.reconnect import PatientConnection

log = structlog.get_logger("service.db.pool")
DISCARDED = Counter(
    "lineup_db_connections_discarded_total",
    "Pooled connections closed after a failed statement instead of being reused (on Citus only).",
)

Pool = AsyncConnectionPool[AsyncConnection[DictRow]]
ACT = TypeVar("ACT", bound=AsyncConnection[Any])
# How long a checkout waits for a connection unless told otherwise (``serve`` passes
# DB_UNAVAILABLE_AFTER_SECONDS): through a failover of a few seconds it waits and then commits;
# through a longer outage the request answers 503 with Retry-After, not a hang.
CHECKOUT_TIMEOUT = 5.0
# How long a caller whose statement failed on a broken connection waits for the test of the idle
# ones (``drop_dead_connections``) before its error goes on. A live server answers the test at once,
# a restarted one refuses at once; only a vanished one (a partition) leaves the test waiting on
# TCP (DB_TCP_USER_TIMEOUT_SECONDS), and then the caller gains nothing by waiting too: the idle
# connections are out of the pool while they are tested, so its retry waits for a good one anyway.
SWEEP_WAIT = 1.0
# The psycopg_pool minor version whose private state RecoveringPool's getconn/putconn read.
LEAN_POOL_VERSION = ["3", "3"]


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
        #: Seconds spent in checkouts that did not find an idle connection at once, all together:
        #: psycopg_pool's own figure (``requests_wait_ms``) drops each wait's fraction of a
        #: millisecond, which is most waits on a fast database (``service.db.pool_metrics``).
        self.wait_seconds = 0.0
        # The lock-free getconn/putconn: for the psycopg_pool version they are written for, and only
        # without a check or reset callback (each needs psycopg_pool's own path).
        self._lean = (
            psycopg_pool.__version__.split(".")[:2] == LEAN_POOL_VERSION
            and self._check is None
            and self._reset is None
        )

    # getconn and putconn decide the common case — a connection idle, nobody waiting, nobody in the
    # pool's critical section — without the pool's asyncio lock, its two critical sections, its
    # INFO log calls (psycopg.pool logs at WARNING) and its timing: the same changes to the pool's
    # state the critical sections make, made with no await between them, so no other task can see
    # them half done (one event loop thread). Anything else — the pool closed or not yet open, a
    # waiting client to hand the connection to, a check or reset callback, a connection that is
    # expired, drained, broken or not idle — takes psycopg_pool's own path. Reads psycopg_pool's
    # private state, so only with the minor version this is written for and tested against
    # (tests/integration/test_pool_recovery.py); any other version takes psycopg_pool's path always.

    async def getconn(self, timeout: float | None = None) -> ACT:  # noqa: ASYNC109 - psycopg_pool's
        if self._lean and self._pool and not self._waiting and not self._lock.locked() and not self._closed:
            conn: ACT = self._pool.popleft()
            if len(self._pool) < self._nconns_min:
                self._nconns_min = len(self._pool)
            self._stats[self._REQUESTS_NUM] += 1
            conn._pool = self
            return conn
        began = monotonic()
        try:
            return await super().getconn(timeout)
        finally:
            self.wait_seconds += monotonic() - began

    async def putconn(self, conn: ACT) -> None:
        if (
            self._lean
            and getattr(conn, "_pool", None) is self
            and not self._closed
            and not self._waiting
            and not self._lock.locked()
            and conn.pgconn.transaction_status == TransactionStatus.IDLE
            and conn._created_at > self._drained_at
            and conn._expire_at > monotonic()
        ):
            conn._pool = None
            self._pool.append(conn)
            if self._pool_full_event and len(self._pool) >= self._min_size:
                self._pool_full_event.set()
            return
        await super().putconn(conn)

    def connection(self, timeout: float | None = None) -> Lease[ACT]:  # type: ignore[override]
        """A connection for one ``async with``: taken with ``getconn``, given back with ``putconn``
        (``Lease``)."""
        return Lease(self, timeout)

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

    async def drop_dead_connections(self, wait: float | None = None) -> None:
        """Test the idle connections, replace the dead ones; callers at the same time share one test.
        Returns when it is done, or after ``wait`` seconds (it goes on meanwhile)."""
        if self._sweep is None or self._sweep.done():
            self.sweeps += 1
            self._sweep = asyncio.ensure_future(self.check())
            self._sweep.add_done_callback(_sweep_done)
        if wait is None:
            await asyncio.shield(self._sweep)
        else:
            await asyncio.wait((self._sweep,), timeout=wait)


class Lease(Generic[ACT]):
    """``RecoveringPool.connection()``: psycopg_pool's ``connection()`` without the generator-based
    context manager and without entering the connection itself, whose exit commits (or rolls back)
    — nothing to do on the pool's autocommit connections, where a transaction is always a
    ``conn.transaction()`` block that ends itself; a connection given back in any other state is
    rolled back or replaced by ``putconn``. Every unit of work (so every tool call) takes one: a
    class saves an async generator, contextlib's wrapper, and the connection's lock and commit.

    A statement that fails on a broken connection makes the pool test its idle ones
    (``drop_dead_connections``) before the error reaches the caller, then the broken one goes back
    to the pool, which replaces it. On Citus (``discard_after_error``) a connection whose statement
    failed is closed first, and so replaced too."""

    __slots__ = ("_conn", "_pool", "_timeout")

    def __init__(self, pool: RecoveringPool[ACT], timeout: float | None) -> None:
        self._pool = pool
        self._timeout = timeout

    async def __aenter__(self) -> ACT:
        self._conn = await self._pool.getconn(self._timeout)
        return self._conn

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        conn = self._conn
        try:
            if isinstance(error, psycopg.Error):
                if self._pool.discard_after_error and not conn.closed:
                    await self._pool._discard(conn, error)
                if isinstance(error, psycopg.OperationalError) and conn.broken:
                    await self._pool.drop_dead_connections(wait=SWEEP_WAIT)
        finally:
            await self._pool.putconn(conn)


def _sweep_done(sweep: asyncio.Future[None]) -> None:
    """A test of the idle connections that failed as a whole (the pool closed meanwhile): said, and
    never an "exception was never retrieved" at exit."""
    if not sweep.cancelled() and (error := sweep.exception()) is not None:
        log.warning("pool_check_failed", error=repr(error))


async def _configure(conn: AsyncConnection[DictRow]) -> None:
    # Times leave the database as UTC whatever the server's default is.
    await conn.execute("SET TIME ZONE 'UTC'")


async def idle_transaction_bound(conn: AsyncConnection[Any]) -> str:
    """This session's ``idle_in_transaction_session_timeout`` as Postgres shows it ("0": none). The
    roles get one (``service.db.role_limits``): a transaction whose client vanished with a lock held
    ends after it, rather than when TCP gives the connection up."""
    cursor = conn.cursor(row_factory=tuple_row)
    await cursor.execute("SELECT current_setting('idle_in_transaction_session_timeout')")
    row = await cursor.fetchone()
    return str(row[0]) if row is not None else "0"


def prepare_options(prepared: bool = True) -> dict[str, Any]:
    """Connection options for ``DB_PREPARED_STATEMENTS``: off, ``prepare_threshold=None``, which
    psycopg reads as "never prepare" — neither automatically (after 5 runs of a statement) nor
    where a call site asks for it (``prepare=True``): every statement is then sent unnamed
    (parse, bind and execute in one message), which a pooler in transaction mode can carry."""
    return {} if prepared else {"prepare_threshold": None}


async def open_pool(
    url: str,
    *,
    size: int = 10,
    name: str = "lineup",
    prepared: bool = True,
    timeout: float = CHECKOUT_TIMEOUT,  # noqa: ASYNC109 - the pool's checkout timeout, not this call's
) -> Pool:
    """The pool of ``serve`` (opened): ``timeout``, how long a checkout waits for a connection."""
    pool: Pool = RecoveringPool(
        url,
        min_size=min(2, size),
        max_size=size,
        name=name,  # its metrics' label (service.db.pool_metrics), and its application_name
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
        timeout=timeout,
        # No check on checkout (it costs a round trip per request): a connection broken by a
        # database restart or failover fails its statement, the pool then drops every dead
        # connection at once (``RecoveringPool``), and the tool-call path retries.
        max_idle=300,
    )
    await pool.open(wait=True, timeout=30)
    return pool

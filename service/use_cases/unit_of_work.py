"""A unit of work: one connection, one transaction, and what it makes known once it has committed.

Every use case runs in one (``Runtime.unit_of_work``). Inside, it notes what it did: the operations
it settled (counted and logged), the conversations it changed (their event streams), that it queued
outbox rows (the relays) or opened a deadline (the sweeper). Once the transaction commits, all of it
is released at once — metrics and log lines, then the wake-ups (``service.wakeups``); if the
transaction rolls back, it is dropped, so nothing is ever reported that did not happen. The database
layer signals nothing itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import datetime
from types import TracebackType
from typing import Any, Protocol

from psycopg import AsyncConnection
from psycopg.rows import DictRow

from service.metrics import emit_settled
from service.wakeups import Wakeups

Conn = AsyncConnection[DictRow]


class Connections(Protocol):
    """Where a unit of work takes its connection: the pool (``serve``), or the one connection of
    ``python -m service ops`` (``service.use_cases.one_connection``)."""

    def connection(self, timeout: float | None = None) -> AbstractAsyncContextManager[Conn]: ...


class Works(Protocol):
    """What the operators' use cases need of a runtime: units of work and the wake-ups they
    release. ``Runtime`` is one; so is the CLI's ``OneConnection``."""

    wakeups: Wakeups

    def unit_of_work(self, *, transaction: bool = True) -> AbstractAsyncContextManager[UnitOfWork]: ...


@dataclass
class UnitOfWork:
    conn: Conn
    settled: list[Mapping[str, Any]] = field(default_factory=list)
    conversations: set[str] = field(default_factory=set)
    outbox: bool = False
    deadline: datetime | None = None
    actions: list[Callable[[], None]] = field(default_factory=list)

    def changed(self, conversation_id: str, *, outbox: bool = False) -> None:
        """A conversation changed (and, with ``outbox``, queued an outbox row)."""
        self.conversations.add(conversation_id)
        self.outbox = self.outbox or outbox

    def made_due(self) -> None:
        """Outbox rows became due (requeued, or delivery resumed): the relays should look."""
        self.outbox = True

    def observed(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """Operations settled here (rows of ``settle_focusing_v2``), each with its outbox row."""
        for row in rows:
            self.settled.append(row)
            self.changed(str(row["conversation_id"]), outbox=True)

    def opened(self, deadline: datetime) -> None:
        """An operation opened here falls due at ``deadline``."""
        self.deadline = deadline if self.deadline is None else min(self.deadline, deadline)

    def then(self, action: Callable[[], None]) -> None:
        """Do this (count, log) after the commit, and never if it rolls back."""
        self.actions.append(action)

    def release(self, wakeups: Wakeups) -> None:
        """After the commit: count and log, then wake whoever waits."""
        emit_settled(self.settled)
        for action in self.actions:
            action()
        if self.conversations or self.outbox or self.deadline is not None:
            wakeups.committed(self.conversations, outbox=self.outbox, deadline=self.deadline)


class unit_of_work:  # noqa: N801 - used as a function: ``async with unit_of_work(pool, wakeups)``
    """One connection and one transaction, committed on success and rolled back on any error; what
    the work noted is released only after the commit. ``transaction=False`` is for work of one
    statement, which is its own transaction on the pool's autocommit connections.

    A class rather than a generator-based context manager: every tool call runs in one, and a
    generator costs it an async generator, its finalizer hooks and contextlib's wrapper."""

    __slots__ = ("_connection", "_pool", "_timeout", "_transaction", "_wakeups", "_work")

    def __init__(
        self, pool: Connections, wakeups: Wakeups, *, transaction: bool = True, timeout: float | None = None
    ) -> None:
        self._pool = pool
        self._wakeups = wakeups
        self._timeout = timeout  # how long to wait for a connection (None: the pool's own timeout)
        self._transaction: AbstractAsyncContextManager[Any] | None = None if transaction else _NO_TRANSACTION
        self._connection: AbstractAsyncContextManager[Conn] | None = None
        self._work: UnitOfWork | None = None

    async def __aenter__(self) -> UnitOfWork:
        self._connection = self._pool.connection(self._timeout)
        conn = await self._connection.__aenter__()
        work = self._work = UnitOfWork(conn)
        if self._transaction is None:
            self._transaction = conn.transaction()
            try:
                await self._transaction.__aenter__()
            except BaseException as error:
                await self._connection.__aexit__(type(error), error, error.__traceback__)
                raise
        return work

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> bool:
        assert self._connection is not None
        assert self._work is not None
        assert self._transaction is not None
        swallowed = False
        if self._transaction is not _NO_TRANSACTION:
            try:
                # psycopg commits here, or rolls back (and swallows only its own Rollback).
                swallowed = bool(await self._transaction.__aexit__(kind, error, trace))
            except BaseException as failure:  # the commit failed: the connection sees that error
                if not await self._connection.__aexit__(type(failure), failure, failure.__traceback__):
                    raise
                return True
            if swallowed:
                kind = error = trace = None
        suppressed = bool(await self._connection.__aexit__(kind, error, trace))
        if kind is None:
            self._work.release(self._wakeups)
        return swallowed or suppressed


class _NoTransaction:
    """Stands for "no transaction of its own" (``transaction=False``)."""


_NO_TRANSACTION: Any = _NoTransaction()

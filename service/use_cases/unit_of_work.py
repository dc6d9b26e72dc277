"""A unit of work: one connection, one transaction, and what it makes known once it has committed.

Every use case runs in one (``Runtime.unit_of_work``). Inside, it notes what it did: the operations
it settled (counted and logged), the conversations it changed (their event streams), that it queued
outbox rows (the relays) or opened a deadline (the sweeper). Once the transaction commits, all of it
is released at once — metrics and log lines, then the wake-ups (``service.wakeups``); if the
transaction rolls back, it is dropped, so nothing is ever reported that did not happen. The database
layer signals nothing itself.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from psycopg import AsyncConnection
from psycopg.rows import DictRow

from service.metrics import emit_settled
from service.wakeups import Wakeups

Conn = AsyncConnection[DictRow]


class Connections(Protocol):
    """Where a unit of work takes its connection: the pool (``serve``), or the one connection of
    ``python -m service ops`` (``service.use_cases.one_connection``)."""

    def connection(self) -> AbstractAsyncContextManager[Conn]: ...


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
        """Operations settled here (rows of ``settle_focusing``), each with its outbox row."""
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


@asynccontextmanager
async def unit_of_work(
    pool: Connections, wakeups: Wakeups, *, transaction: bool = True
) -> AsyncIterator[UnitOfWork]:
    """One connection and one transaction, committed on success and rolled back on any error; what
    the work noted is released only after the commit. ``transaction=False`` is for work of one
    statement, which is its own transaction on the pool's autocommit connections."""
    async with pool.connection() as conn:
        work = UnitOfWork(conn)
        if transaction:
            async with conn.transaction():
                yield work
        else:
            yield work
    work.release(wakeups)

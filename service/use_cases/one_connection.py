"""A runtime of one connection, for ``python -m service ops``: the operators' use cases run on it
exactly as they run on the service's pool, so a CLI write takes the ops API's path (the same rule,
the same unit of work, the same log line, the same after-commit wake-up).

Its wake-ups go to the other processes through ``Wakeups.run`` on a connection of its own, as in
``serve``; what is still pending when the command ends is sent before the command returns.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from service.use_cases.unit_of_work import Conn, UnitOfWork, unit_of_work
from service.wakeups import Wakeups


class OneConnection:
    """Every unit of work on ``conn``, one after the other (the CLI runs one command at a time)."""

    def __init__(self, conn: Conn, wakeups: Wakeups) -> None:
        self.conn = conn
        self.wakeups = wakeups

    @asynccontextmanager
    async def connection(self, timeout: float | None = None) -> AsyncIterator[Conn]:  # noqa: ASYNC109
        yield self.conn  # the one connection, held already: nothing to wait for

    def unit_of_work(self, *, transaction: bool = True) -> AbstractAsyncContextManager[UnitOfWork]:
        return unit_of_work(self, self.wakeups, transaction=transaction)


@asynccontextmanager
async def one_connection(conn: Conn, url: str, *, prepared: bool = True) -> AsyncIterator[OneConnection]:
    """``conn`` as a runtime; the wake-ups its work released are sent (or given up, logged) before
    this returns."""
    wakeups = Wakeups(url, interval=0, prepared=prepared)
    stop = asyncio.Event()
    sender = asyncio.create_task(wakeups.run(stop), name="ops-wakeups")
    try:
        yield OneConnection(conn, wakeups)
    finally:
        stop.set()
        await sender

"""The database probe of ``/readyz`` (the service's and the relay's), answered within a bound.

A probe draws a pooled connection and asks the schema's revision: a round trip, answered in
milliseconds by a live database and refused at once by a stopped one. A database that vanished
without a word (a partition: the connection half-open) answers nothing, and the statement would
wait until TCP gives up (``DB_TCP_USER_TIMEOUT_SECONDS``), longer than a prober waits: the probe
would be "no answer" rather than a 503 naming why. So the probe runs as a task of its own, and
``/readyz`` waits for it at most ``timeout`` seconds (``READY_CHECK_TIMEOUT_SECONDS``) before it
answers that the database did not answer in time. The task is never cancelled (a cancelled
statement makes psycopg send a cancel request on a connection of its own, and wait for it): it
ends by itself when its connection does, and until it has, every probe waits on the same one, so
probes never pile up on a dead connection.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable


class ReadyCheck:
    """``await check()``: ``probe``'s answer (a reason not to be ready, or None), or a reason of its
    own when ``probe`` has not answered within ``timeout`` seconds. One probe at a time."""

    def __init__(self, probe: Callable[[], Awaitable[str | None]], timeout: float) -> None:
        self._probe = probe
        self.timeout = timeout
        self._running: asyncio.Task[str | None] | None = None

    async def __call__(self) -> str | None:
        running = self._running
        if running is None or running.done():
            running = self._running = asyncio.ensure_future(self._answer())
        done, _ = await asyncio.wait((running,), timeout=self.timeout)
        if not done:
            return f"the database did not answer within {self.timeout:g} s"
        return running.result()

    async def _answer(self) -> str | None:
        try:
            return await self._probe()
        except Exception as exc:  # the reason, whatever failed
            return str(exc).strip() or type(exc).__name__

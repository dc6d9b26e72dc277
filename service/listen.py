"""One LISTEN loop for every process: the relay's wake-ups and the event streams' projections.

A LISTEN connection is lost with its server: a restart, a failover, ``pg_terminate_backend``, a
node that stops answering. The loop then reconnects with the one reconnect policy
(``service.db.reconnect.Backoff``: 50 ms doubling to 5 s), through the same URL — with several
hosts, libpq's walk finds the new primary — and, once listening again, calls ``on_connect`` to wake
everyone: anything committed while nobody listened sent its NOTIFY into the void, so every waiter
must look for itself once. A connection that stays quiet is asked ``SELECT 1`` every
``heartbeat`` seconds, so a server that vanished without closing the socket is noticed too.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

import psycopg
import structlog
from psycopg import sql

from service.background import sleep_until
from service.db.pool import prepare_options
from service.db.reconnect import Backoff

log = structlog.get_logger("service.listen")

# How long one wait for notifications lasts before the loop checks whether the heartbeat is due.
# The stop does not wait for it: it cancels the wait at once.
QUIET_CHECK = 1.0
HEARTBEAT = 10.0
HEARTBEAT_TIMEOUT = 5.0


class Listener:
    """LISTEN on ``channels`` until ``stop``: ``on_notify`` per notification, ``on_connect`` per connect."""

    def __init__(
        self,
        url: str,
        channels: Sequence[str],
        *,
        on_notify: Callable[[psycopg.Notify], None],
        on_connect: Callable[[], None],
        application_name: str,
        backoff: Backoff | None = None,
        heartbeat: float = HEARTBEAT,
        heartbeat_timeout: float = HEARTBEAT_TIMEOUT,
        prepared: bool = True,
    ) -> None:
        self._url = url
        self._channels = tuple(channels)
        self._on_notify = on_notify
        self._on_connect = on_connect
        self._application_name = application_name
        self._backoff = backoff or Backoff(last=5.0)
        self._heartbeat = heartbeat
        self._heartbeat_timeout = heartbeat_timeout
        self._options = prepare_options(prepared)
        self.connected = asyncio.Event()
        self.connects = 0
        self.backend_pid: int | None = None

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                async with await psycopg.AsyncConnection.connect(
                    self._url, autocommit=True, application_name=self._application_name, **self._options
                ) as conn:
                    for channel in self._channels:
                        await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
                    self._backoff.reset()
                    self.connects += 1
                    self.backend_pid = conn.info.backend_pid
                    self.connected.set()
                    self._on_connect()
                    await self._receive(conn, stop)
            except Exception as exc:  # any: the server gone, or an error it answers
                self.connected.clear()
                pause = self._backoff.pause()
                log.warning(
                    "listen_lost",
                    listener=self._application_name,
                    error=str(exc).strip() or type(exc).__name__,
                    retry_in=round(pause, 3),
                )
                await sleep_until(pause, stop)
        self.connected.clear()

    async def _receive(self, conn: psycopg.AsyncConnection[tuple[object, ...]], stop: asyncio.Event) -> None:
        """Notifications until ``stop``, which ends the wait at once (a serve's stop and every
        in-process app's shutdown waited up to a quarter of a second for its next look at the flag)."""
        listening = asyncio.ensure_future(self._listen(conn))
        stopping = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait((listening, stopping), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (listening, stopping):
                task.cancel()
            await asyncio.gather(listening, stopping, return_exceptions=True)
        if not listening.cancelled() and (error := listening.exception()) is not None:
            raise error  # the connection lost: run() reconnects

    async def _listen(self, conn: psycopg.AsyncConnection[tuple[object, ...]]) -> None:
        loop = asyncio.get_running_loop()
        quiet_since = loop.time()
        while True:
            async for note in conn.notifies(timeout=QUIET_CHECK):
                quiet_since = loop.time()
                self._on_notify(note)
            if loop.time() - quiet_since >= self._heartbeat:
                async with asyncio.timeout(self._heartbeat_timeout):
                    await conn.execute("SELECT 1")
                quiet_since = loop.time()

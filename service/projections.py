"""Projection changes for the Host's event stream.

Triggers write ``projection_events`` rows in the deciding transactions and ``NOTIFY
lineup_projection`` with ``"<seq> <conversation_id>"``. Each service process keeps one LISTEN
connection (this hub) and wakes the streams of that conversation, so every replica pushes what any
replica committed. A stream always reads the rows themselves (``event_seq`` > the last one it
sent), so a lost notification only delays an event until the next poll, and a client resumes after
a reconnect from ``Last-Event-ID``. Per conversation, every writer holds the workspace row lock,
so ``event_seq`` order is commit order within a conversation.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from collections.abc import AsyncIterator, Iterator

import psycopg
import structlog

log = structlog.get_logger("service.projections")
CHANNEL = "lineup_projection"


class ProjectionHub:
    def __init__(self, listen_url: str) -> None:
        self._listen_url = listen_url
        self._waiters: defaultdict[str, set[asyncio.Event]] = defaultdict(set)
        self.connected = asyncio.Event()

    @contextlib.contextmanager
    def subscribe(self, conversation_id: str) -> Iterator[asyncio.Event]:
        event = asyncio.Event()
        self._waiters[conversation_id].add(event)
        try:
            yield event
        finally:
            waiters = self._waiters.get(conversation_id)
            if waiters is not None:
                waiters.discard(event)
                if not waiters:
                    del self._waiters[conversation_id]

    def _notify(self, conversation_id: str) -> None:
        for event in self._waiters.get(conversation_id, ()):
            event.set()

    def _notify_all(self) -> None:
        for waiters in self._waiters.values():
            for event in waiters:
                event.set()

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                async with await psycopg.AsyncConnection.connect(
                    self._listen_url, autocommit=True, application_name="lineup-projections"
                ) as conn:
                    await conn.execute(f"LISTEN {CHANNEL}")
                    self.connected.set()
                    self._notify_all()  # whatever committed while we were not listening
                    async for note in _until(conn.notifies(), stop):
                        _, _, conversation_id = note.payload.partition(" ")
                        self._notify(conversation_id)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.connected.clear()
                log.warning("projection_listen_error", error=str(exc))
                await asyncio.sleep(1.0)


async def _until(
    notifies: AsyncIterator[psycopg.Notify], stop: asyncio.Event
) -> AsyncIterator[psycopg.Notify]:
    stopper = asyncio.ensure_future(stop.wait())
    try:
        while True:
            nxt = asyncio.ensure_future(anext(notifies))
            done, _ = await asyncio.wait({nxt, stopper}, return_when=asyncio.FIRST_COMPLETED)
            if stopper in done:
                nxt.cancel()
                with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                    await nxt
                return
            yield nxt.result()
    finally:
        stopper.cancel()

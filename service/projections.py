"""Projection changes for the Host's event stream.

Triggers write ``projection_events`` rows in the deciding transactions. After the commit, the
process that committed wakes its own streams of that conversation at once (``service.wakeups``)
and, coalesced, sends ``NOTIFY lineup_projection`` naming the conversations changed. Each service
process keeps one LISTEN connection (this hub) and wakes the streams of the conversations named, so
every replica pushes what any replica committed. A stream always reads the rows themselves
(``event_seq`` > the last one it sent), so a lost notification only delays an event until the next
poll, and a client resumes after a reconnect from ``Last-Event-ID``. Per conversation, every writer
holds the workspace row lock, so ``event_seq`` order is commit order within a conversation.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from collections.abc import AsyncIterator, Iterator

import psycopg
import structlog

from service.wakeups import PROJECTION_CHANNEL, Wakeups, parse_projection_payload

log = structlog.get_logger("service.projections")


class ProjectionHub:
    def __init__(self, listen_url: str, wakeups: Wakeups) -> None:
        self._listen_url = listen_url
        self._wakeups = wakeups
        wakeups.on_conversation(self._notify)
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
                    await conn.execute(f"LISTEN {PROJECTION_CHANNEL}")
                    self.connected.set()
                    self._notify_all()  # whatever committed while we were not listening
                    async for note in _until(conn.notifies(), stop):
                        if note.pid == self._wakeups.notifier_pid:
                            continue  # sent by this process, whose streams woke at commit
                        conversations = parse_projection_payload(note.payload)
                        if conversations is None:
                            self._notify_all()
                        else:
                            for conversation_id in conversations:
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

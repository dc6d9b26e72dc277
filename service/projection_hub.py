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
from collections.abc import Iterator

import psycopg

from service.listen import Listener
from service.wakeups import PROJECTION_CHANNEL, Wakeups, parse_projection_payload


class ProjectionHub:
    """A background loop (``service.background``): LISTEN for other processes' projection changes;
    a round is a connection made."""

    name = "projection-hub"

    def __init__(self, listen_url: str, wakeups: Wakeups) -> None:
        self._wakeups = wakeups
        wakeups.on_conversation(self._notify)
        self._waiters: defaultdict[str, set[asyncio.Event]] = defaultdict(set)
        self._listener = Listener(
            listen_url,
            [PROJECTION_CHANNEL],
            on_notify=self._received,
            on_connect=self._notify_all,  # whatever committed while we were not listening
            application_name="lineup-projections",
        )
        self.connected = self._listener.connected

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

    def wake(self, conversation_id: str) -> None:
        """Wake this process's readers of one conversation."""
        self._notify(conversation_id)

    def _notify(self, conversation_id: str) -> None:
        for event in self._waiters.get(conversation_id, ()):
            event.set()

    def _notify_all(self) -> None:
        for waiters in self._waiters.values():
            for event in waiters:
                event.set()

    @property
    def rounds(self) -> int:
        return self._listener.connects

    async def run(self, stop: asyncio.Event) -> None:
        """LISTEN until ``stop``, reconnecting after any loss (``service.listen``)."""
        await self._listener.run(stop)

    def _received(self, note: psycopg.Notify) -> None:
        if note.pid == self._wakeups.notifier_pid:
            return  # sent by this process, whose streams woke at commit
        conversations = parse_projection_payload(note.payload)
        if conversations is None:
            self._notify_all()
        else:
            for conversation_id in conversations:
                self._notify(conversation_id)

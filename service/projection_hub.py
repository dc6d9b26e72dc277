"""Projection changes for the Host's event stream.

Triggers write ``projection_events`` rows in the deciding transactions. After the commit, the
process that committed wakes its own streams of that conversation at once (``service.wakeups``)
and, coalesced, sends ``NOTIFY lineup_projection`` naming the conversations changed. Each service
process keeps one LISTEN connection (this hub) and wakes the streams of the conversations named, so
every replica pushes what any replica committed. A stream always reads the rows themselves
(``event_seq`` > the last one it sent), so a lost notification only delays an event until the next
poll, and a client resumes after a reconnect from ``Last-Event-ID``. Per conversation, every writer
holds the workspace row lock, so ``event_seq`` order is commit order within a conversation.

Postgres cannot keep a role that may connect from NOTIFYing any channel (the operators' read-only
role included), so what a NOTIFY names is only a hint: remote wake-ups are coalesced, each
conversation's and the wake-alls (``*``) alike, to at most one per ``wake_interval``
(``PROJECTION_WAKE_INTERVAL_SECONDS``, 0.25 s) — the first at once, any further ones within the
interval as one more at its end. A flood of NOTIFYs, whoever sends it, costs each stream at most two
reads per interval; a legitimate change reaches a stream at most ``wake_interval`` later than
without the bound, and only when its conversation was woken just before.

Without a session to LISTEN on (``DATABASE_URL`` through a pooler in transaction mode and no
``LISTEN_DATABASE_URL``), the hub polls instead: every ``poll_seconds`` (``PROJECTION_POLL_SECONDS``,
1 s) one statement names the conversations with events newer than the last one it saw, and their
streams wake. What another replica commits then reaches a stream here up to ``poll_seconds``
later; what this process commits still wakes its own streams at commit.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from collections.abc import Callable, Iterator

import psycopg
import structlog

from service.db.pool import Pool
from service.db.reconnect import Backoff
from service.listen import Listener
from service.wakeups import PROJECTION_CHANNEL, Wakeups, parse_projection_payload

log = structlog.get_logger("service.projection_hub")

NEWEST = "SELECT coalesce(max(event_seq), 0) AS event_seq FROM projection_events"
CHANGED = """
SELECT conversation_id, max(event_seq) AS event_seq FROM projection_events
WHERE event_seq > %(after)s GROUP BY conversation_id
"""


class ProjectionHub:
    """A background loop (``service.background``): LISTEN for other processes' projection changes;
    a round is a connection made."""

    name = "projection-hub"

    def __init__(
        self,
        listen_url: str | None,
        wakeups: Wakeups,
        *,
        pool: Pool | None = None,
        poll_seconds: float = 1.0,
        prepared: bool = True,
        wake_interval: float = 0.25,
    ) -> None:
        """LISTEN on ``listen_url``; without one, poll through ``pool`` every ``poll_seconds``.
        Remote wake-ups are coalesced to at most one per ``wake_interval`` (each conversation's,
        and the wake-alls)."""
        self._wakeups = wakeups
        self._remote = RemoteWakes(wake_interval, self._notify, self._notify_all)
        #: NOTIFYs of other processes received (and how many of them woke every conversation).
        self.received = 0
        wakeups.on_conversation(self._notify)
        self._waiters: defaultdict[str, set[asyncio.Event]] = defaultdict(set)
        self._listener: Listener | None = None
        self._pool = pool
        self._polls = 0
        if listen_url is not None:
            self._listener = Listener(
                listen_url,
                [PROJECTION_CHANNEL],
                on_notify=self._received,
                on_connect=self._notify_all,  # whatever committed while we were not listening
                application_name="lineup-projections",
                prepared=prepared,
            )
            self.connected = self._listener.connected
        elif pool is None:
            raise ValueError("a ProjectionHub without a LISTEN URL polls: it needs a pool")
        else:
            self.interval = poll_seconds
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
                    self._remote.forget(conversation_id)

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
    def remote_wake_alls(self) -> int:
        """Wake-alls that other processes' NOTIFYs set off (each at most one per interval)."""
        return self._remote.woke_all

    @property
    def polling(self) -> bool:
        return self._listener is None

    @property
    def rounds(self) -> int:
        """Connections made (LISTEN), or polls finished."""
        return self._listener.connects if self._listener is not None else self._polls

    async def run(self, stop: asyncio.Event) -> None:
        """LISTEN until ``stop``, reconnecting after any loss (``service.listen``); or poll."""
        if self._listener is not None:
            await self._listener.run(stop)
        else:
            await self._poll(stop)

    async def _poll(self, stop: asyncio.Event) -> None:
        assert self._pool is not None
        backoff = Backoff(last=self.interval)
        seen: int | None = None
        while not stop.is_set():
            pause = self.interval
            try:
                async with self._pool.connection() as conn:
                    if seen is None:
                        row = await (await conn.execute(NEWEST)).fetchone()
                        seen = int(row["event_seq"]) if row else 0
                        self.connected.set()
                        self._notify_all()  # as after a LISTEN's connect
                    else:
                        rows = await (await conn.execute(CHANGED, {"after": seen})).fetchall()
                        for row in rows:
                            seen = max(seen, int(row["event_seq"]))
                            self._notify(row["conversation_id"])
                self._polls += 1
                backoff.reset()
            except Exception as exc:
                pause = backoff.pause()
                log.warning(
                    "projection_poll_failed", error=str(exc).strip() or repr(exc), retry_in=round(pause, 3)
                )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), pause)

    def _received(self, note: psycopg.Notify) -> None:
        if note.pid == self._wakeups.notifier_pid:
            return  # sent by this process, whose streams woke at commit
        self.received += 1
        conversations = parse_projection_payload(note.payload)
        if conversations is None:
            self._remote.wake_all()
        else:
            for conversation_id in conversations:
                if conversation_id in self._waiters:  # no stream here: nothing to wake, nothing kept
                    self._remote.wake(conversation_id)


class RemoteWakes:
    """Wake-ups that other processes' NOTIFYs ask for, at most one per ``interval`` for each
    conversation and one for all of them: the first at once, later ones within the interval folded
    into one at its end (so none is lost: a stream reads every row after the last it sent)."""

    def __init__(self, interval: float, wake: Callable[[str], None], wake_all: Callable[[], None]) -> None:
        self._interval = interval
        self._wake = wake
        self._wake_all = wake_all
        self._next: dict[str, float] = {}  # conversation -> when it may be woken again
        self._next_all = 0.0
        self._pending: set[str] = set()
        self._pending_all = False
        self._timer: asyncio.TimerHandle | None = None
        #: Wake-alls run (at once or at an interval's end).
        self.woke_all = 0

    def wake(self, conversation_id: str) -> None:
        now = self._now()
        if now >= self._next.get(conversation_id, 0.0):
            self._next[conversation_id] = now + self._interval
            self._wake(conversation_id)
        else:
            self._pending.add(conversation_id)
            self._arm(self._next[conversation_id])

    def wake_all(self) -> None:
        now = self._now()
        if now >= self._next_all:
            self._next_all = now + self._interval
            self.woke_all += 1
            self._wake_all()
        else:
            self._pending_all = True
            self._arm(self._next_all)

    def forget(self, conversation_id: str) -> None:
        """The conversation has no stream here any more."""
        self._next.pop(conversation_id, None)
        self._pending.discard(conversation_id)

    def _now(self) -> float:
        return asyncio.get_running_loop().time()

    def _arm(self, when: float) -> None:
        if self._timer is not None and self._timer.when() <= when:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer = asyncio.get_running_loop().call_at(when, self._flush)

    def _flush(self) -> None:
        self._timer = None
        pending, self._pending = self._pending, set()
        if self._pending_all:
            self._pending_all = False
            self.wake_all()
        for conversation_id in pending:
            self.wake(conversation_id)

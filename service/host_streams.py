"""The Host's event streams of one process: one database read per conversation wake-up, whatever
the number of its streams, and a bound on how many streams may be open.

Each conversation with an open stream has one feed: a task that, when the conversation is woken
(``service.projection_hub``) or every ``POLL_SECONDS``, reads its new ``projection_events`` once and
hands the rows to every stream of it. A stream that resumes from an older ``Last-Event-ID`` reads
its own backlog first, then takes the feed's rows, dropping any it already sent; rows arrive in
``event_seq`` order, which within a conversation is commit order.

A person's stream lives no longer than their session: it ends at the session's expiry (counted
down from the database clock's reading when it opened), at once when this process ends the
session, and — ended on another replica — at the next check: every ``session_check_seconds`` one
statement asks the database which of this process's streaming sessions are still open.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

import structlog
from psycopg.rows import DictRow

from service.db import host_sessions as sessions_db
from service.db import projections as proj_db
from service.db.pool import Pool
from service.domain.errors import TooMany, Unavailable
from service.projection_hub import ProjectionHub

log = structlog.get_logger("service.host_streams")
POLL_SECONDS = 15.0
QUEUE_ROWS = 1000


@dataclass(eq=False)
class Stream:
    """One open event stream: the rows its feed reads, in order; ``ended`` says why its person's
    session no longer lets it run (``revoked`` or ``expired``)."""

    conversation_id: str
    owner: UUID | None
    rows: asyncio.Queue[DictRow] = field(default_factory=lambda: asyncio.Queue(QUEUE_ROWS))
    lagged: bool = False
    #: The loop time at which the owner's session expires (None: the backend's, no end).
    expires_at: float | None = None
    ended: str | None = None
    woken: asyncio.Event = field(default_factory=asyncio.Event)

    def end(self, reason: str) -> None:
        if self.ended is None:
            self.ended = reason
        self.woken.set()


@dataclass(eq=False)
class _Feed:
    conversation_id: str
    streams: set[Stream] = field(default_factory=set)
    last: int | None = None
    task: asyncio.Task[None] | None = None


class HostStreams:
    def __init__(
        self,
        pool: Pool,
        hub: ProjectionHub,
        *,
        per_session: int,
        total: int,
        session_check_seconds: float = 5.0,
    ) -> None:
        self._pool = pool
        self._hub = hub
        self._per_session = per_session
        self._total = total
        self._session_check_seconds = session_check_seconds
        self._feeds: dict[str, _Feed] = {}
        self._owners: Counter[UUID] = Counter()
        self._sessions_task: asyncio.Task[None] | None = None
        self.open_streams = 0
        self.reads = 0
        self.session_checks = 0

    def open(self, conversation_id: str, owner: UUID | None, expires_in: float | None = None) -> Stream:
        """A new stream of the conversation; ``owner`` is a person's session (None: the backend)
        with ``expires_in`` seconds left to it.

        Refused with 429 past the per-session bound and 503 past the process's bound.
        """
        if self.open_streams >= self._total:
            raise Unavailable("too many event streams are open on this server; retry", retry_after=5)
        if owner is not None and self._owners[owner] >= self._per_session:
            raise TooMany(f"at most {self._per_session} event streams may be open per session")
        loop = asyncio.get_running_loop()
        expires_at = None if expires_in is None else loop.time() + expires_in
        stream = Stream(conversation_id, owner, expires_at=expires_at)
        self.open_streams += 1
        if owner is not None:
            self._owners[owner] += 1
            if self._sessions_task is None or self._sessions_task.done():
                self._sessions_task = asyncio.create_task(self._check_sessions(), name="event-sessions")
        feed = self._feeds.get(conversation_id)
        if feed is None:
            feed = self._feeds[conversation_id] = _Feed(conversation_id)
        feed.streams.add(stream)
        if feed.task is None or feed.task.done():
            feed.task = asyncio.create_task(self._read(feed), name=f"event-feed-{conversation_id[:32]}")
        return stream

    def close(self, stream: Stream) -> None:
        feed = self._feeds.get(stream.conversation_id)
        if feed is None or stream not in feed.streams:
            return
        feed.streams.discard(stream)
        self.open_streams -= 1
        if stream.owner is not None:
            self._owners[stream.owner] -= 1
            if self._owners[stream.owner] <= 0:
                del self._owners[stream.owner]
            if not self._owners and self._sessions_task is not None:
                self._sessions_task.cancel()
                self._sessions_task = None
        if not feed.streams:
            del self._feeds[stream.conversation_id]
            if feed.task is not None:
                feed.task.cancel()

    def end_session(self, session_id: UUID, reason: str = "revoked") -> None:
        """This process ended a session: its streams here end now."""
        for feed in self._feeds.values():
            for stream in feed.streams:
                if stream.owner == session_id:
                    stream.end(reason)

    async def _check_sessions(self) -> None:
        """While persons' streams are open: every ``session_check_seconds``, one statement finds
        which of their sessions are still open; the streams of the others end."""
        while self._owners:
            await asyncio.sleep(self._session_check_seconds)
            owners = list(self._owners)
            try:
                async with self._pool.connection() as conn:
                    still_open = await sessions_db.open_among(conn, owners)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("event_sessions_check_failed", error=str(exc))
                continue
            self.session_checks += 1
            for owner in set(owners) - still_open:
                self.end_session(owner, "ended")

    async def position(self, stream: Stream) -> int:
        """Where a stream without a resume point starts: the present of its conversation."""
        async with self._pool.connection() as conn:
            return await proj_db.latest(conn, stream.conversation_id)

    def anchor(self, stream: Stream, position: int) -> None:
        """The feed reads from no later than where this stream starts (rows it already sent are
        dropped by each stream), and reads now."""
        feed = self._feeds.get(stream.conversation_id)
        if feed is not None:
            feed.last = position if feed.last is None else min(feed.last, position)
            self._hub.wake(stream.conversation_id)

    async def backlog(self, conversation_id: str, after: int) -> AsyncIterator[DictRow]:
        """A resuming stream's own rows after ``after``, up to the present."""
        while True:
            async with self._pool.connection() as conn:
                rows = await proj_db.after(conn, conversation_id, after)
            for row in rows:
                after = int(row["event_seq"])
                yield row
            if not rows:
                return

    async def _read(self, feed: _Feed) -> None:
        with self._hub.subscribe(feed.conversation_id) as wake:
            while feed.streams:
                wake.clear()
                try:
                    await self._read_once(feed)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    log.warning(
                        "event_feed_read_failed", conversation_id=feed.conversation_id, error=str(exc)
                    )
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wake.wait(), POLL_SECONDS)

    async def _read_once(self, feed: _Feed) -> None:
        if feed.last is None:
            return  # no stream has said where it starts yet
        async with self._pool.connection() as conn:
            while True:
                rows = await proj_db.after(conn, feed.conversation_id, feed.last or 0)
                self.reads += 1
                for row in rows:
                    feed.last = int(row["event_seq"])
                    for stream in feed.streams:
                        _offer(stream, row)
                if len(rows) < proj_db.PAGE:
                    return


def _offer(stream: Stream, row: Any) -> None:
    try:
        stream.rows.put_nowait(row)
    except asyncio.QueueFull:
        # A client that stops reading is cut off rather than let this process's memory grow; it
        # reconnects with Last-Event-ID and reads its backlog from the database.
        stream.lagged = True

"""After-commit wake-ups: telling waiters to look again once a transaction has committed.

Nothing NOTIFYs from inside a deciding transaction: every NOTIFYing commit takes one cluster-wide
lock, which would serialise every decision behind it. Instead, once a transaction commits, its
process

* wakes its own waiters at once, in memory: the event streams of the conversations it changed, and
  its deadline sweeper when it opened an operation due before the sweeper's next known deadline;
* has ``Wakeups.run`` tell the other processes (relays, other replicas' event streams): at most one
  NOTIFY statement every ``interval`` seconds, on a connection of its own, naming every
  conversation changed since the last one.

Every listener also polls, so a lost wake-up (a dropped connection, a crashed process) only delays
what it would have hastened; it never loses anything.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
from collections.abc import Callable, Iterable
from datetime import datetime

import psycopg
import structlog

from service.db.pool import prepare_options

log = structlog.get_logger("service.wakeups")

OUTBOX_CHANNEL = "lineup_outbox"
PROJECTION_CHANNEL = "lineup_projection"
# Every conversation changed since the last NOTIFY; "*" when there were too many to list.
ALL_CONVERSATIONS = "*"
# NOTIFY payloads must stay under 8000 bytes.
MAX_PAYLOAD_BYTES = 7900
MAX_PROJECTION_PAYLOADS = 4


def projection_payloads(conversations: Iterable[str]) -> list[str]:
    """JSON arrays of conversation ids, each under the NOTIFY size limit; ``["*"]`` when too many."""
    payloads: list[str] = []
    batch: list[str] = []
    size = 2
    for conversation_id in sorted(conversations):
        item = len(json.dumps(conversation_id, ensure_ascii=False).encode()) + 1
        if batch and size + item > MAX_PAYLOAD_BYTES:
            payloads.append(json.dumps(batch, ensure_ascii=False, separators=(",", ":")))
            batch, size = [], 2
        batch.append(conversation_id)
        size += item
    if batch:
        payloads.append(json.dumps(batch, ensure_ascii=False, separators=(",", ":")))
    return payloads if len(payloads) <= MAX_PROJECTION_PAYLOADS else [ALL_CONVERSATIONS]


def parse_projection_payload(payload: str) -> list[str] | None:
    """The conversations a projection NOTIFY names; None means every conversation."""
    if payload == ALL_CONVERSATIONS:
        return None
    if payload.startswith("["):
        with contextlib.suppress(ValueError):
            names = json.loads(payload)
            if isinstance(names, list) and all(isinstance(name, str) for name in names):
                return names
        return None
    # "<event_seq> <conversation_id>", as sent by triggers before migration 0005.
    _, _, conversation_id = payload.partition(" ")
    return [conversation_id]


@functools.cache
def _notify_statement(notes: int) -> str:
    return "SELECT " + ", ".join("pg_notify(%s, %s)" for _ in range(notes))


class Wakeups:
    """One per process: local waiters are woken at once, other processes by a coalesced NOTIFY."""

    name = "wakeups"

    def __init__(self, url: str | None = None, *, interval: float = 0.005, prepared: bool = True) -> None:
        self.url = url  # where the NOTIFYs go; a Wakeups without one only wakes this process
        self.interval = interval
        # NOTIFY needs no session: each statement commits on its own, so a pooler in transaction
        # mode carries it — without server-side prepares (DB_PREPARED_STATEMENTS=off).
        self._options = prepare_options(prepared)
        self._conversation_waiters: list[Callable[[str], None]] = []
        self._deadline_waiters: list[Callable[[datetime], None]] = []
        self._conversations: set[str] = set()
        self._outbox = False
        self._pending = asyncio.Event()
        self.notifier_pid: int | None = None
        self.rounds = 0  # NOTIFY statements sent

    def on_conversation(self, callback: Callable[[str], None]) -> None:
        self._conversation_waiters.append(callback)

    def on_deadline(self, callback: Callable[[datetime], None]) -> None:
        self._deadline_waiters.append(callback)

    def committed(
        self, conversations: Iterable[str] = (), *, outbox: bool = False, deadline: datetime | None = None
    ) -> None:
        """Announce what a committed transaction changed."""
        for conversation_id in conversations:
            self._conversations.add(conversation_id)
            for wake in self._conversation_waiters:
                wake(conversation_id)
        if deadline is not None:
            for wake_at in self._deadline_waiters:
                wake_at(deadline)
        if outbox:
            self._outbox = True
        if self._conversations or self._outbox:
            self._pending.set()

    async def _wake_at(self, stop: asyncio.Event) -> None:
        await stop.wait()
        self._pending.set()

    def _take(self) -> list[tuple[str, str]]:
        notes = [(PROJECTION_CHANNEL, p) for p in projection_payloads(self._conversations)]
        if self._outbox:
            notes.append((OUTBOX_CHANNEL, ""))
        self._conversations = set()
        self._outbox = False
        self._pending.clear()
        return notes

    async def run(self, stop: asyncio.Event) -> None:
        """Send the coalesced NOTIFYs to ``url`` until ``stop`` (and, at the stop, what is still
        pending, once); a failed send is logged and dropped."""
        if self.url is None:
            raise ValueError("a Wakeups without a database URL wakes only this process")
        url = self.url
        loop = asyncio.get_running_loop()
        conn: psycopg.AsyncConnection[tuple[object, ...]] | None = None
        cursor: psycopg.AsyncCursor[tuple[object, ...]] | None = None
        last_sent = -self.interval
        # The stop wakes the loop as a commit does: one task for the whole run, where waiting on
        # both at each round took a task and a wait of its own (a round per commit or so).
        stopping = asyncio.ensure_future(self._wake_at(stop))
        try:
            while True:
                if not stop.is_set():
                    await self._pending.wait()
                if stop.is_set() and not (self._conversations or self._outbox):
                    break
                if not stop.is_set():
                    # Coalesce: at most one NOTIFY statement per interval.
                    await asyncio.sleep(max(0.0, last_sent + self.interval - loop.time()))
                notes = self._take()
                if not notes:
                    continue
                try:
                    if conn is None or conn.closed or cursor is None:
                        conn = await psycopg.AsyncConnection.connect(
                            url, autocommit=True, application_name="lineup-wakeups", **self._options
                        )
                        self.notifier_pid = conn.info.backend_pid
                        cursor = conn.cursor()  # kept: a cursor builds its adapters when made
                    await cursor.execute(_notify_statement(len(notes)), [v for note in notes for v in note])
                    self.rounds += 1
                except Exception as exc:
                    # Any failure (the database gone, or an error it answers): the listeners'
                    # polling covers what this wake-up would have hastened.
                    log.warning("wakeup_notify_failed", error=str(exc).strip() or repr(exc))
                    if conn is not None:
                        await conn.close()
                    conn = cursor = None
                    await asyncio.sleep(0.5)
                last_sent = loop.time()
        finally:
            stopping.cancel()
            if conn is not None:
                await conn.close()

"""History retention inside ``serve``: finished history older than ``HISTORY_RETENTION_DAYS`` goes,
in bounded batches (``service/db/sql/97_retention.sql``).

A round runs each kind of row in turn — operations, then their instances, then recorded answers
(expired, not deleted: a replay is refused, never run again), messages, surface events, answered
interactions — one batch per transaction, until a batch finds nothing older left. Operations and
instances are walked by their time-ordered keys from where the last batch stopped, so rows that
must stay (kept by a pending or dead outbox row, a pending interaction) are looked at once a round,
not once a batch. Each batch holds an advisory lock for its own transaction only: of several
replicas, one prunes a batch at a time, and the others leave the round to it (and row locks are
taken SKIP LOCKED besides). After a round the replica reports its setting and what it removed in
``history_retention``, which ``ops stats`` and the console show.

On Citus a batch over every shard cannot lock its rows (``FOR UPDATE ... SKIP LOCKED`` stays in one
shard): a round there finds the conversations with history older than the cutoff and prunes each
whole with ``prune_conversation``, a function distributed by its conversation (run on the worker
holding it, under the conversation's lock when nobody holds it), by the same rules.
"""

from __future__ import annotations

import asyncio
import random
import socket
import uuid
from datetime import UTC, datetime, timedelta

import psycopg
import structlog

from service.background import Periodic
from service.clock import CLOCK
from service.db import retention as db
from service.db.pool import Pool

log = structlog.get_logger("service.history_retention")

PRUNE_BATCH = 500
PRUNE_EVERY = 300.0
BATCH_PAUSE = 0.02


async def prune_kind(
    pool: Pool, kind: str, cutoff: datetime, *, batch: int = PRUNE_BATCH, pause: float = BATCH_PAUSE
) -> int | None:
    """Batches of one kind until none is left older than ``cutoff``; the rows removed, or None when
    another replica held the lock (it prunes this round)."""
    removed = 0
    after: uuid.UUID | None = None
    while True:
        async with pool.connection() as conn, conn.transaction():
            if not await db.try_lock(conn):
                return None
            done = await db.batch(conn, kind, cutoff, batch, after)
        removed += done.removed
        if kind in db.KEYSET:
            after = done.last_id
            if done.examined < batch:
                return removed
        elif done.examined < batch or done.removed == 0:
            return removed
        if pause:
            await asyncio.sleep(pause)


async def prune_history(
    pool: Pool,
    days: int,
    *,
    by: str = "",
    batch: int = PRUNE_BATCH,
    pause: float = BATCH_PAUSE,
    now: datetime | None = None,
) -> dict[str, int] | None:
    """One round over every kind; what it removed per kind (reported), or None when another replica
    was pruning."""
    cutoff = (now or datetime.fromtimestamp(CLOCK.now(), UTC)) - timedelta(days=days)
    pruned: dict[str, int] = {}
    for kind in db.KINDS:
        removed = await prune_kind(pool, kind, cutoff, batch=batch, pause=pause)
        if removed is None:
            return None
        pruned[kind] = removed
    async with pool.connection() as conn:
        await db.report(conn, days, by or socket.gethostname(), pruned)
    return pruned


async def prune_history_by_conversation(
    pool: Pool,
    days: int,
    *,
    by: str = "",
    batch: int = PRUNE_BATCH,
    now: datetime | None = None,
) -> dict[str, int] | None:
    """On Citus: one round, conversation by conversation (``prune_conversation``, each on the worker
    holding it); what it removed per kind, or None when another replica holds the round."""
    cutoff = (now or datetime.fromtimestamp(CLOCK.now(), UTC)) - timedelta(days=days)
    pruned = dict.fromkeys(db.KINDS, 0)
    async with pool.connection() as lock:
        if not (await (await lock.execute(db.TRY_ROUND_LOCK)).fetchone() or {}).get("locked"):
            return None
        try:
            seen: list[str] = []
            while True:
                async with pool.connection() as conn:
                    found = await db.conversations_with_history(conn, cutoff, batch, seen)
                if not found:
                    break
                seen += found
                for conversation_id in found:
                    async with pool.connection() as conn:
                        for kind, removed in (
                            await db.prune_conversation(conn, conversation_id, cutoff)
                        ).items():
                            pruned[kind] += removed
        finally:
            await lock.execute(db.ROUND_UNLOCK)
    async with pool.connection() as conn:
        await db.report(conn, days, by or socket.gethostname(), pruned)
    return pruned


class HistoryPruning(Periodic):
    """The round every ``PRUNE_EVERY`` seconds give or take a fifth, the first 5-60 s after the start
    (replicas started together spread out). A database error is logged and the next round comes."""

    name = "history-retention"

    def __init__(
        self, pool: Pool, days: int, *, every: float = PRUNE_EVERY, distributed: bool = False
    ) -> None:
        super().__init__(every, jitter=0.2, first_delay=random.uniform(5.0, 60.0))
        self._pool = pool
        self._days = days
        self._distributed = distributed
        self.last: dict[str, int] | None = None

    async def run_once(self) -> None:
        prune = prune_history_by_conversation if self._distributed else prune_history
        self.last = await prune(self._pool, self._days)
        if self.last and any(self.last.values()):
            log.info("history_pruned", rows=self.last, retention_days=self._days)

    def failed(self, error: Exception) -> None:
        if not isinstance(error, psycopg.Error | OSError):
            raise error
        log.warning("history_prune_failed", error=str(error).strip() or repr(error))

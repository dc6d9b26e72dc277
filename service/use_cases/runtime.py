"""What every use case needs: the pool, the settings, the manifests, the after-commit wake-ups."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from psycopg import AsyncConnection
from psycopg.rows import DictRow

from service import wakeups
from service.db.pool import Pool
from service.manifests import Registry
from service.metrics import deferred_until_commit, emit_committed
from service.settings import Settings


@dataclass
class Runtime:
    pool: Pool
    settings: Settings
    registry: Registry
    wakeups: wakeups.Wakeups = field(default_factory=wakeups.Wakeups)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncConnection[DictRow]]:
        """One connection, one transaction: committed on success, rolled back on any error.

        Decisions observed inside are counted and logged, and the conversations changed inside
        announced (``service.wakeups``), only after the commit.
        """
        with deferred_until_commit() as decided, wakeups.collecting() as changes:
            async with self.pool.connection() as conn, conn.transaction():
                yield conn
        emit_committed(decided)
        changes.conversations.update(str(row["conversation_id"]) for row in decided)
        self.wakeups.committed(changes.conversations, outbox=changes.outbox or bool(decided))

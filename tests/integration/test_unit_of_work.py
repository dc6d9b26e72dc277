"""A unit of work releases what it noted — counts, log lines, wake-ups — only after its commit, and
drops it when the transaction rolls back."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from service.db.pool import Pool, open_pool
from service.use_cases.unit_of_work import unit_of_work
from service.wakeups import Wakeups


@pytest.fixture
async def pool(database_url: str) -> AsyncIterator[Pool]:
    pool = await open_pool(database_url, size=2)
    yield pool
    await pool.close()


class Listener:
    def __init__(self, wakeups: Wakeups) -> None:
        self.conversations: list[str] = []
        self.deadlines: list[datetime] = []
        wakeups.on_conversation(self.conversations.append)
        wakeups.on_deadline(self.deadlines.append)


async def test_what_a_committed_unit_noted_is_released_after_the_commit(pool: Pool, db: Any) -> None:
    wakeups = Wakeups()
    heard = Listener(wakeups)
    done: list[str] = []
    due = datetime.now(UTC) + timedelta(minutes=1)
    async with unit_of_work(pool, wakeups) as work:
        await work.conn.execute("INSERT INTO workspaces (conversation_id) VALUES ('w-1')")
        work.changed("w-1")
        work.opened(due)
        work.then(lambda: done.append("counted"))
        # Nothing is out before the commit: another connection does not see the row yet either.
        assert (heard.conversations, heard.deadlines, done) == ([], [], [])
        assert db.execute("SELECT count(*) AS n FROM workspaces").fetchone()["n"] == 0
    assert (heard.conversations, heard.deadlines, done) == (["w-1"], [due], ["counted"])
    assert db.execute("SELECT count(*) AS n FROM workspaces").fetchone()["n"] == 1


async def test_what_a_rolled_back_unit_noted_is_dropped(pool: Pool, db: Any) -> None:
    wakeups = Wakeups()
    heard = Listener(wakeups)
    done: list[str] = []

    async def refused() -> None:
        async with unit_of_work(pool, wakeups) as work:
            await work.conn.execute("INSERT INTO workspaces (conversation_id) VALUES ('w-2')")
            work.changed("w-2", outbox=True)
            work.then(lambda: done.append("counted"))
            raise RuntimeError("refused")

    with pytest.raises(RuntimeError, match="refused"):
        await refused()
    assert (heard.conversations, done) == ([], [])
    assert db.execute("SELECT count(*) AS n FROM workspaces").fetchone()["n"] == 0


async def test_a_unit_of_one_statement_releases_once_the_statement_returned(pool: Pool) -> None:
    wakeups = Wakeups()
    heard = Listener(wakeups)
    async with unit_of_work(pool, wakeups, transaction=False) as work:
        await work.conn.execute("INSERT INTO workspaces (conversation_id) VALUES ('w-3')")
        work.changed("w-3")
    assert heard.conversations == ["w-3"]

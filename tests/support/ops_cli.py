"""The operator CLI in-process against a test database, for the tests of ``python -m service ops``."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import psycopg
import pytest
from psycopg.rows import dict_row

from service.cli.ops import main
from service.use_cases.one_connection import OneConnection, one_connection

T = TypeVar("T")


def ops(database_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Any:
    """Run ``ops ARGS…`` in-process against the test database; returns (exit code, stdout, stderr)."""
    monkeypatch.setenv("DATABASE_URL", database_url)

    def run(*args: str) -> tuple[int, str, str]:
        # On a thread of its own, as the command runs its own event loop: async tests call it too.
        with ThreadPoolExecutor(max_workers=1) as thread:
            code = thread.submit(main, list(args)).result()
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return run


def outbox_row(db: Any, event_id: str) -> Any:
    return db.execute("SELECT * FROM outbox WHERE event_id = %s", [event_id]).fetchone()


def as_operator(database_url: str, work: Callable[[OneConnection], Awaitable[T]]) -> T:
    """Run an operators' use case on one connection of its own, as ``python -m service ops`` does
    (its wake-ups sent before this returns)."""

    async def run() -> T:
        async with (
            await psycopg.AsyncConnection.connect(
                database_url, autocommit=True, row_factory=dict_row
            ) as conn,
            one_connection(conn, database_url) as rt,
        ):
            return await work(rt)

    return asyncio.run(run())

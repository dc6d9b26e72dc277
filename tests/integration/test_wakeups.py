"""Wake-ups are sent after commit, coalesced, from a connection of their own — never from inside the
transaction that decided."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest
from litestar.testing import AsyncTestClient

from harness.calls import interrupt_body, start_body
from service.app import create_app
from service.manifests import Registry
from service.wakeups import OUTBOX_CHANNEL, PROJECTION_CHANNEL, Wakeups
from tests.conftest import AGENT, make_settings


@pytest.fixture
async def listener(database_url: str) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute(f"LISTEN {OUTBOX_CHANNEL}")
        await conn.execute(f"LISTEN {PROJECTION_CHANNEL}")
        yield conn


async def _notes(
    conn: psycopg.AsyncConnection[Any], seconds: float, stop_after: int | None = None
) -> list[psycopg.Notify]:
    return [note async for note in conn.notifies(timeout=seconds, stop_after=stop_after)]


async def test_many_commits_make_few_notifies_naming_every_conversation(
    database_url: str, listener: psycopg.AsyncConnection[Any]
) -> None:
    wakeups = Wakeups(database_url, interval=0.05)
    stop = asyncio.Event()
    sender = asyncio.create_task(wakeups.run(stop))
    began = time.monotonic()
    for n in range(200):
        wakeups.committed([f"conv-{n}"], outbox=n % 2 == 0)
        await asyncio.sleep(0.001)
    notes = await _notes(listener, 0.5)
    elapsed = time.monotonic() - began
    stop.set()
    await sender
    projection = [n for n in notes if n.channel == PROJECTION_CHANNEL]
    outbox = [n for n in notes if n.channel == OUTBOX_CHANNEL]
    assert {c for n in projection for c in json.loads(n.payload)} == {f"conv-{n}" for n in range(200)}
    # At most one NOTIFY statement per interval (plus the first, sent at once).
    assert 1 <= len(outbox) <= elapsed / 0.05 + 2
    assert len(outbox) < 100  # 100 commits queued outbox rows: fewer notifications than that
    assert {n.pid for n in notes} == {wakeups.notifier_pid}


async def test_a_tool_call_wakes_relays_and_streams_after_commit_from_another_connection(
    database_url: str, registry: Registry, listener: psycopg.AsyncConnection[Any], db: Any
) -> None:
    app = create_app(make_settings(database_url), registry, sweeper=False)
    async with AsyncTestClient(app=app) as client:
        assert (
            await client.post("/v1/tool-calls", json=start_body("conv-n"), headers=AGENT)
        ).status_code == 202
        # Each commit's wake-ups go out as one NOTIFY statement, so they arrive together.
        first = await _notes(listener, 10, stop_after=1)
        assert (await client.post("/v1/tool-calls", json=interrupt_body("conv-n"), headers=AGENT)).json()[
            "status"
        ] == "interrupted"
        second = await _notes(listener, 10, stop_after=2)
        notifier = app.state.runtime.wakeups.notifier_pid
    # The start changed the conversation (its stream wakes); it queued nothing for the relays.
    assert [(n.channel, json.loads(n.payload)) for n in first] == [(PROJECTION_CHANNEL, ["conv-n"])]
    # The interrupt settled: the relays are woken too.
    assert sorted(n.channel for n in second) == [OUTBOX_CHANNEL, PROJECTION_CHANNEL]
    assert {n.pid for n in first + second} == {notifier}
    assert db.execute("SELECT count(*) AS n FROM outbox").fetchone()["n"] == 1


async def test_the_sweeper_is_woken_in_process_by_a_start_it_did_not_poll_for(
    database_url: str, registry: Registry, db: Any
) -> None:
    # A poll every 30 s: only the in-process wake-up of the start can make it settle in time.
    settings = make_settings(database_url, sweeper_poll_seconds=30)
    app = create_app(settings, registry, sweeper=True)
    async with AsyncTestClient(app=app) as client:
        # Every claimer has looked once and found nothing due: each now sleeps the poll interval.
        sweeper = app.state.sweeper
        for _ in range(200):
            if sweeper.rounds >= settings.sweeper_claimers:
                break
            await asyncio.sleep(0.05)
        assert sweeper.rounds >= settings.sweeper_claimers
        answer = await client.post(
            "/v1/tool-calls", json=start_body("conv-s", duration_seconds=1), headers=AGENT
        )
        operation_id = answer.json()["operation"]["operation_id"]
        row: dict[str, Any] = {}
        for _ in range(200):
            row = db.execute(
                "SELECT state, lateness_ms FROM operations WHERE operation_id = %s", [operation_id]
            ).fetchone()
            if row["state"] != "focusing":
                break
            await asyncio.sleep(0.05)
    assert row["state"] == "completed"
    # Woken by the start, it settles within moments of the deadline; unwoken, it would sleep 30 s.
    assert 0 <= row["lateness_ms"] < 2000

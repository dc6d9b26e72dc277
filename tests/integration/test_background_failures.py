"""No quiet death: every background loop of ``serve`` survives any database error — not only a lost
connection (``OperationalError``) but one the database answers (``ProgrammingError`` and kin: a
function or table that is not there, a payload it refuses) — logging one line per failure and
coming round again once the error is gone; and a loop that does end with an error fails /readyz
naming it and makes ``serve`` exit non-zero.

The errors are real ones from Postgres: the statement a loop runs is made to fail by renaming what
it reads (``ALTER ... RENAME``) and renamed back."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator, MutableMapping
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
import structlog
from litestar.testing import AsyncTestClient

from harness.calls import expire, start_body
from harness.processes import ROOT, environment, free_port
from service.app import create_app
from service.background import Background, Loop
from service.db.pool import Pool, open_pool
from service.listen import Listener
from service.manifests import Registry
from service.projection_hub import ProjectionHub
from service.settings import Settings
from service.use_cases.deadlines import DeadlineSweeper
from service.use_cases.maintenance import Maintenance
from service.wakeups import Wakeups
from tests.conftest import AGENT, AGENT_TOKEN, HOST_TOKEN, OPERATOR_TOKEN
from tests.support.waiting import until

Db = psycopg.Connection[dict[str, Any]]


@pytest.fixture
async def pool(database_url: str) -> AsyncIterator[Pool]:
    pool = await open_pool(database_url, size=4)
    yield pool
    await pool.close()


@contextlib.asynccontextmanager
async def running(*loops: Loop) -> AsyncIterator[list[tuple[Loop, BaseException]]]:
    """The loops in a Background; what ended with an error is in the list yielded."""
    ended: list[tuple[Loop, BaseException]] = []
    async with Background(loops, on_failure=lambda loop, error: ended.append((loop, error))):
        yield ended


@contextlib.contextmanager
def renamed(db: Db, kind: str, name: str) -> Any:
    """``name`` (a FUNCTION with its signature, or a TABLE) is not there inside the block."""
    away = "lineup_away"
    db.execute(f"ALTER {kind} {name} RENAME TO {away}")
    try:
        yield
    finally:
        target = name.split("(")[0]
        signature = name[len(target) :]
        db.execute(f"ALTER {kind} {away}{signature} RENAME TO {target}")


def failures(logs: list[MutableMapping[str, Any]], event: str) -> list[MutableMapping[str, Any]]:
    return [entry for entry in logs if entry["event"] == event]


async def test_the_sweeper_survives_a_programming_error_and_settles_once_it_is_gone(
    client: AsyncTestClient[Any], db: Db, pool: Pool
) -> None:
    answer = (await client.post("/v1/tool-calls", json=start_body("sweep-me", 60), headers=AGENT)).json()
    sweeper = DeadlineSweeper(pool, Wakeups(), claimers=1, max_sleep=0.2)
    with structlog.testing.capture_logs() as logs:
        async with running(sweeper) as ended:
            with renamed(db, "FUNCTION", "settle_due(integer)"):
                expire(db, answer["operation"]["operation_id"])
                await until(lambda: sweeper.failures >= 3)
                rounds = sweeper.rounds
            await until(lambda: sweeper.settled_total == 1 and sweeper.rounds > rounds)
    assert ended == []
    logged = failures(logs, "sweeper_failed")
    assert len(logged) == sweeper.failures >= 3  # one line per failure
    assert {entry["error_type"] for entry in logged} == {"UndefinedFunction"}
    assert issubclass(psycopg.errors.UndefinedFunction, psycopg.ProgrammingError)
    state = db.execute("SELECT state FROM operations").fetchone()
    assert state is not None and state["state"] == "completed"


async def test_maintenance_survives_a_programming_error(db: Db, pool: Pool) -> None:
    maintenance = Maintenance(pool)
    with structlog.testing.capture_logs() as logs:
        async with running(maintenance) as ended:
            await until(lambda: maintenance.rounds >= 1)
            with renamed(db, "TABLE", "outbox"):
                maintenance.wake()
                await until(lambda: len(failures(logs, "maintenance_failed")) >= 1)
            maintenance.wake()
            await until(lambda: maintenance.rounds >= 3)
    assert ended == []
    assert len(failures(logs, "maintenance_failed")) == 1
    assert "outbox" in failures(logs, "maintenance_failed")[0]["error"]


async def test_the_projection_poll_survives_a_programming_error(db: Db, pool: Pool, client: Any) -> None:
    hub = ProjectionHub(None, Wakeups(), pool=pool, poll_seconds=0.05)
    with structlog.testing.capture_logs() as logs, hub.subscribe("polled") as woken:
        async with running(hub) as ended:
            await until(lambda: hub.rounds >= 1)
            with renamed(db, "TABLE", "projection_events"):
                await until(lambda: len(failures(logs, "projection_poll_failed")) >= 2)
            woken.clear()
            # Another process commits (its wake-ups never reach this one): the poll finds it.
            await client.post("/v1/tool-calls", json=start_body("polled", 60), headers=AGENT)
            await asyncio.wait_for(woken.wait(), 10)
    assert ended == []


async def test_the_wakeup_sender_survives_an_error_the_database_answers(database_url: str) -> None:
    wakeups = Wakeups(database_url, interval=0)
    refused = [("lineup_projection", "x" * 9000)]  # over NOTIFY's 8000-byte limit: the server refuses
    take = wakeups._take
    answers = iter([refused])
    wakeups._take = lambda: next(answers, None) or take()  # type: ignore[method-assign]
    with structlog.testing.capture_logs() as logs:
        async with running(wakeups) as ended:
            wakeups.committed(["first"])
            await until(lambda: len(failures(logs, "wakeup_notify_failed")) == 1)
            wakeups.committed(["second"])
            await until(lambda: wakeups.rounds == 1)
    assert ended == []
    assert "payload" in failures(logs, "wakeup_notify_failed")[0]["error"].lower()


async def test_a_listen_loop_survives_any_error_and_listens_again(database_url: str) -> None:
    connects: list[int] = []

    def on_connect() -> None:
        connects.append(1)
        if len(connects) == 1:
            raise psycopg.ProgrammingError("injected into the first connect")

    listener = Listener(
        database_url, ["lineup_test"], on_notify=lambda _: None, on_connect=on_connect, application_name="t"
    )
    with structlog.testing.capture_logs() as logs:
        stop = asyncio.Event()
        task = asyncio.create_task(listener.run(stop))
        await until(lambda: len(connects) == 2 and listener.connected.is_set())
        stop.set()
        await asyncio.wait_for(task, 10)
    assert len(failures(logs, "listen_lost")) == 1


class Broken:
    """A loop that ends with an error at once: what a bug in any loop looks like to its process."""

    name = "broken-loop"
    rounds = 0

    async def run(self, stop: asyncio.Event) -> None:
        raise psycopg.ProgrammingError("injected: the loop ends")


async def test_a_loop_that_ends_fails_readyz_naming_it(
    settings: Settings, registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(Maintenance, "run", Broken.run)
    app = create_app(settings, registry, sweeper=False)
    with structlog.testing.capture_logs() as logs:
        async with AsyncTestClient(app=app) as client:
            await until(lambda: app.state.loop_failure is not None, 10)
            answer = await client.get("/readyz")
    assert answer.status_code == 503
    assert "background loop maintenance failed" in answer.json()["reason"]
    assert "injected: the loop ends" in answer.json()["reason"]
    assert failures(logs, "background_loop_failed")[0]["loop"] == "maintenance"


def test_serve_exits_non_zero_a_few_seconds_after_a_loop_ends(database_url: str, tmp_path: Path) -> None:
    port = free_port()
    script = textwrap.dedent(
        f"""
        import sys
        from service.background import Periodic
        from service.use_cases.maintenance import Maintenance
        async def broken(self, stop):
            raise RuntimeError("injected: the loop ends")
        Maintenance.run = broken
        from service.cli.serve import run
        sys.exit(run("127.0.0.1", {port}, sweeper=False))
        """
    )
    env = environment(
        {
            "DATABASE_URL": database_url,
            "AGENT_TOKEN": AGENT_TOKEN,
            "HOST_TOKEN": HOST_TOKEN,
            "OPERATOR_TOKEN": OPERATOR_TOKEN,
        }
    )
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        process = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, env=env, stdout=out, stderr=out)
    try:
        seen_503 = None
        deadline = time.monotonic() + 180
        while process.poll() is None and time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                answer = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1)
                if answer.status_code == 503:
                    seen_503 = answer.json()["reason"]
            time.sleep(0.1)
        code = process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    text = log.read_text()
    assert code == 1, text[-2000:]
    assert seen_503 is not None and "background loop maintenance failed" in seen_503
    assert "background_loop_failed" in text
    assert "error: background loop maintenance failed" in text


def test_the_relay_s_claimer_and_writers_survive_programming_errors(database_url: str, db: Db) -> None:
    from harness.receiver import Receiver, new_secret
    from tests.support.outbox import outbox_rows, queue_results, relay_config, running_relay, wait_until

    secret = new_secret()
    with (
        Receiver([secret]) as agent,
        running_relay(relay_config(database_url, agent.url, [secret])) as running,
    ):
        metrics = running.relay.metrics
        wait_until(lambda: getattr(running.relay, "_claimer", None) is not None)
        wait_until(lambda: running.relay._claimer.rounds > 0)
        # The claimer's statement reads delivery_endpoints: gone, every claim is refused.
        with renamed(db, "TABLE", "delivery_endpoints"):
            (first,) = queue_results(db, "relay-claim")
            wait_until(lambda: metrics.database_errors._value.get() >= 3)
        agent.wait_for_accepted({first.event_id}, timeout=30)
        wait_until(lambda: outbox_rows(db)[first.event_id]["status"] == "delivered", timeout=30)
        # The writers' statement writes outbox_attempts: gone, the delivered outcome waits.
        errors = metrics.database_errors._value.get()
        with renamed(db, "TABLE", "outbox_attempts"):
            (second,) = queue_results(db, "relay-record")
            agent.wait_for_accepted({second.event_id}, timeout=30)
            wait_until(lambda: metrics.database_errors._value.get() >= errors + 3)
        wait_until(lambda: outbox_rows(db)[second.event_id]["status"] == "delivered", timeout=30)
    assert agent.accepted_per_event()[second.event_id] == 1  # recorded once it could be, not resent

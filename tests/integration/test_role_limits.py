"""The fourth security review's insider finding: the database roles have limits, only they reach
the database, and the read-only role cannot load the service through NOTIFY.

Roles are cluster-wide: every test makes its own (``tests.integration.test_roles``) and drops them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from litestar.testing import AsyncTestClient

from service.app import create_app
from service.db import roles
from service.host_streams import HostStreams
from service.manifests import Registry
from service.projection_hub import ProjectionHub
from service.wakeups import PROJECTION_CHANNEL
from tests.conftest import make_settings
from tests.integration.test_roles import REGISTRY, as_role, connect, drop_roles, unique_names

Db = psycopg.Connection[dict[str, Any]]
STREAMS = 20
NOTIFIES = 50


@pytest.fixture
def made(database_url: str) -> Iterator[roles.Names]:
    names = unique_names()
    try:
        yield names
    finally:
        drop_roles(database_url, names)


def test_every_role_gets_its_limits_in_this_database(made: roles.Names, database_url: str, db: Db) -> None:
    with psycopg.connect(database_url) as conn:
        outcome = roles.ensure(conn, made, REGISTRY)
    assert not outcome.warnings
    for kind in roles.KINDS:
        want = roles.DEFAULT_LIMITS[kind]
        row = db.execute("SELECT rolconnlimit FROM pg_roles WHERE rolname = %s", (made.of(kind),)).fetchone()
        assert row is not None and row["rolconnlimit"] == want.connection_limit, kind
        with connect(database_url, made.of(kind)) as conn:
            for setting, value in want.settings().items():
                shown = conn.execute(f"SELECT current_setting('{setting}') AS v").fetchone()
                assert shown is not None
                assert _same(shown["v"], value), (kind, setting, shown["v"], value)
    with psycopg.connect(database_url) as conn:
        assert roles.ensure(conn, made, REGISTRY).changes == []  # a second run changes nothing


def _same(shown: str, value: str) -> bool:
    """Postgres shows 60s as "1min" and 1GB as "1GB": compare what it would show for ours."""
    normal = {"60s": "1min", "-1": "-1", "0": "0"}
    return shown == normal.get(value, value)


def test_a_statement_past_its_timeout_and_a_connection_past_the_limit_are_refused(
    made: roles.Names, database_url: str
) -> None:
    limits = roles.parse_limits("runtime.statement_timeout=200ms reader.connection_limit=2")
    with psycopg.connect(database_url) as conn:
        roles.ensure(conn, made, REGISTRY, limits=limits)
    with connect(database_url, made.runtime) as runtime, pytest.raises(psycopg.errors.QueryCanceled):
        runtime.execute("SELECT pg_sleep(5)")
    with connect(database_url, made.owner) as owner:  # migrate: no statement bound
        assert owner.execute("SELECT current_setting('statement_timeout') AS v").fetchone() == {"v": "0"}
    with (
        connect(database_url, made.reader),
        connect(database_url, made.reader),
        pytest.raises(psycopg.OperationalError, match="too many connections for role"),
    ):
        connect(database_url, made.reader)


def test_a_transaction_whose_client_went_silent_is_ended_and_its_locks_freed(
    made: roles.Names, database_url: str, db: Db
) -> None:
    """A replica cut off from the database in the middle of a transaction (a conversation's lock
    held) sends nothing more: the runtime role's idle_in_transaction_session_timeout ends the
    transaction on the server's side, so the lock is free for every other replica, whatever TCP
    makes of the connection. (1 s here; 5 s by default.)"""
    limits = roles.parse_limits("runtime.idle_in_transaction_session_timeout=1s")
    with psycopg.connect(database_url) as conn:
        roles.ensure(conn, made, REGISTRY, limits=limits)
    with connect(database_url, made.runtime) as silent:
        silent.execute("BEGIN")
        silent.execute("SELECT pg_advisory_xact_lock(51)")  # held until the transaction ends
        assert db.execute("SELECT pg_try_advisory_xact_lock(51) AS got").fetchone() == {"got": False}
        freed = False
        for _ in range(100):  # polled: the client says nothing more, as a partitioned one would
            if db.execute("SELECT pg_try_advisory_xact_lock(51) AS got").fetchone() == {"got": True}:
                freed = True
                break
            time.sleep(0.1)
        assert freed, "the silent client's transaction still holds its lock"
        with pytest.raises(psycopg.errors.IdleInTransactionSessionTimeout):
            silent.execute("SELECT 1")


def test_only_the_four_roles_connect_or_make_temporary_tables(
    made: roles.Names, database_url: str, db: Db
) -> None:
    other = f"{made.owner}_other"
    db.execute(psycopg.sql.SQL("CREATE ROLE {} LOGIN").format(psycopg.sql.Identifier(other)))
    try:
        with connect(database_url, other) as before:  # today: CONNECT and TEMP through PUBLIC
            before.execute("CREATE TEMPORARY TABLE scratch (n int)")
        with psycopg.connect(database_url) as conn:
            roles.ensure(conn, made, REGISTRY)
        with pytest.raises(psycopg.OperationalError, match="permission denied for database"):
            connect(database_url, other)
        for kind in roles.KINDS:
            with connect(database_url, made.of(kind)) as conn:
                conn.execute("CREATE TEMPORARY TABLE scratch (n int)")
    finally:
        db.execute(psycopg.sql.SQL("DROP OWNED BY {}").format(psycopg.sql.Identifier(other)))
        db.execute(psycopg.sql.SQL("DROP ROLE {}").format(psycopg.sql.Identifier(other)))


@pytest.mark.parametrize(
    "bad",
    [
        "runtime.connection_limit=many",
        "nobody.statement_timeout=1s",
        "runtime.work_mem=1GB",
        "runtime=1",
        "reader.temp_file_limit=1GB;x",
    ],
)
def test_db_role_limits_names_what_is_wrong(bad: str) -> None:
    with pytest.raises(ValueError, match=r"expected|whole number|value such as"):
        roles.parse_limits(bad)


async def _streams_open(app: Any) -> tuple[ProjectionHub, HostStreams]:
    hub: ProjectionHub = app.state.projections
    streams: HostStreams = app.state.host_streams
    # Looked at, not awaited: the app's loop sets the event, and an await of it from this one is
    # woken only when its own timeout ends (a full 20 s a test before).
    for _ in range(400):
        if hub.connected.is_set():
            break
        await asyncio.sleep(0.05)
    assert hub.connected.is_set()
    for n in range(STREAMS):
        stream = streams.open(f"conv-notify-{n}", None)
        streams.anchor(stream, await streams.position(stream))
    for _ in range(400):  # every feed read once: where its stream starts
        if streams.reads >= STREAMS:
            break
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.3)
    return hub, streams


async def _notify_as_reader(database_url: str, reader: str, hub: ProjectionHub) -> None:
    received = hub.received
    async with await psycopg.AsyncConnection.connect(as_role(database_url, reader), autocommit=True) as conn:
        for _ in range(NOTIFIES):  # each its own transaction: Postgres folds equal ones in one
            await conn.execute("SELECT pg_notify(%s, '*')", (PROJECTION_CHANNEL,))
    for _ in range(400):
        if hub.received >= received + NOTIFIES:
            break
        await asyncio.sleep(0.05)
    assert hub.received == received + NOTIFIES


async def test_a_flood_of_notifies_from_the_reader_costs_the_streams_one_read_each_per_interval(
    made: roles.Names, database_url: str, registry: Registry
) -> None:
    with psycopg.connect(database_url) as conn:
        roles.ensure(conn, made, REGISTRY)
    settings = make_settings(database_url, projection_wake_interval_seconds=60)
    app = create_app(settings, registry, sweeper=False)
    async with AsyncTestClient(app=app):
        hub, streams = await _streams_open(app)
        before = streams.reads
        await _notify_as_reader(database_url, made.reader, hub)
        await asyncio.sleep(0.5)  # what the wake-ups set off has run
        extra = streams.reads - before
    # Before the bound: each NOTIFY woke every stream's feed (1,000 reads for 50 NOTIFYs, 20
    # streams). Now: the first wakes them at once, the rest fold into one at the interval's end.
    assert extra <= 2 * STREAMS, extra


async def test_wake_ups_folded_within_an_interval_still_run_at_its_end(
    made: roles.Names, database_url: str, registry: Registry
) -> None:
    with psycopg.connect(database_url) as conn:
        roles.ensure(conn, made, REGISTRY)
    settings = make_settings(database_url, projection_wake_interval_seconds=0.5)
    app = create_app(settings, registry, sweeper=False)
    async with AsyncTestClient(app=app):
        hub, _ = await _streams_open(app)
        await _notify_as_reader(database_url, made.reader, hub)
        for _ in range(200):
            if hub.remote_wake_alls >= 2:
                break
            await asyncio.sleep(0.05)
        assert hub.remote_wake_alls >= 2  # the leading one, and the folded ones at the end

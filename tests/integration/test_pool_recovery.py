"""The pools find the database again by themselves: every dead connection is dropped as soon as one
is found dead, and a new connection waits out a short outage instead of failing at once."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import TupleRow

from harness.database import tcp_address, with_hosts
from harness.processes import free_port
from service.db.pool import RecoveringPool, open_pool
from service.db.reconnect import PatientConnection
from tests.support.tcp_proxy import TcpProxy


def terminate(db: Any, application_name: str) -> int:
    rows = db.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
        [application_name],
    ).fetchall()
    return len(rows)


async def test_one_dead_connection_makes_the_pool_drop_every_dead_one(database_url: str, db: Any) -> None:
    pool = await open_pool(database_url, size=4, name="lineup-test-pool")
    try:
        assert isinstance(pool, RecoveringPool)
        async with contextlib.AsyncExitStack() as held:  # grow the pool to four idle connections
            for _ in range(4):
                await held.enter_async_context(pool.connection())
        assert pool.get_stats()["pool_available"] == 4
        assert terminate(db, "lineup-test-pool") == 4

        with pytest.raises(psycopg.OperationalError):
            async with pool.connection() as conn:
                await conn.execute("SELECT 1")
        assert pool.sweeps == 1
        # The three other dead ones were found and replaced before the error reached its caller:
        # each of the next statements succeeds on its first try.
        for _ in range(4):
            async with pool.connection(timeout=10) as conn:
                assert await (await conn.execute("SELECT 1 AS one")).fetchone() == {"one": 1}
        assert pool.sweeps == 1
    finally:
        await pool.close()


async def test_a_statement_error_on_a_live_connection_tests_nothing(database_url: str) -> None:
    pool = await open_pool(database_url, size=2, name="lineup-test-pool")
    try:
        with pytest.raises(psycopg.errors.UndefinedTable):
            async with pool.connection() as conn:
                await conn.execute("SELECT * FROM no_such_table")
        assert isinstance(pool, RecoveringPool)
        assert pool.sweeps == 0
    finally:
        await pool.close()


async def test_a_new_connection_waits_out_a_short_outage(database_url: str) -> None:
    """Nothing listens on the port for 0.6 s (a restart, a promotion): connect keeps trying."""
    host, real_port = tcp_address(database_url)
    port = free_port()
    url = with_hosts(database_url, [("127.0.0.1", port)])
    connecting = asyncio.create_task(PatientConnection[TupleRow].connect(url, autocommit=True))
    await asyncio.sleep(0.6)
    assert not connecting.done()
    proxy = await TcpProxy(host, real_port, port).start()
    try:
        conn = await asyncio.wait_for(connecting, 5)
        async with conn:
            assert await (await conn.execute("SELECT 1")).fetchone() == (1,)
    finally:
        await proxy.close()


async def test_a_pool_reaches_the_host_that_answers_among_several(database_url: str) -> None:
    host, port = tcp_address(database_url)
    url = with_hosts(database_url, [("127.0.0.1", free_port()), (host, port)])
    pool = await open_pool(url, size=2, name="lineup-test-pool")
    try:
        async with pool.connection() as conn:
            row = await (await conn.execute("SELECT current_database() AS db")).fetchone()
        assert row == {"db": conninfo_to_dict(database_url)["dbname"]}
    finally:
        await pool.close()

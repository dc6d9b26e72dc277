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


async def test_the_lean_checkout_is_on_for_the_psycopg_pool_it_was_written_for(database_url: str) -> None:
    """RecoveringPool's getconn/putconn read psycopg_pool's private state: a psycopg_pool of another
    minor version turns them off, and this test fails, so the upgrade is looked at."""
    import psycopg_pool

    from service.db.pool import LEAN_POOL_VERSION

    assert psycopg_pool.__version__.split(".")[:2] == LEAN_POOL_VERSION
    pool = await open_pool(database_url, size=2, name="lineup-test-pool")
    try:
        assert isinstance(pool, RecoveringPool)
        assert pool._lean
    finally:
        await pool.close()


async def test_lean_checkouts_leave_the_pool_as_psycopg_pools_own_do(database_url: str) -> None:
    pools = [await open_pool(database_url, size=3, name="lineup-test-pool") for _ in range(2)]
    try:
        lean, plain = pools
        assert isinstance(lean, RecoveringPool) and isinstance(plain, RecoveringPool)
        plain._lean = False
        for pool in pools:
            async with contextlib.AsyncExitStack() as held:  # three at once: the pool grows
                conns = [await held.enter_async_context(pool.connection()) for _ in range(3)]
                for conn in conns:
                    await conn.execute("SELECT 1")
            for _ in range(5):
                async with pool.connection() as conn:
                    await conn.execute("SELECT 1")
        keys = ("pool_min", "pool_max", "pool_size", "pool_available", "requests_waiting", "requests_num")
        ours, theirs = ({k: pool.get_stats().get(k) for k in keys} for pool in pools)
        assert ours == theirs
        assert ours["pool_available"] == 3 and ours["requests_num"] == 8
    finally:
        for pool in pools:
            await pool.close()


async def test_a_returned_connection_goes_to_the_client_waiting_for_it(database_url: str) -> None:
    pool = await open_pool(database_url, size=1, name="lineup-test-pool")
    try:
        first = await pool.getconn()
        waiting = asyncio.create_task(pool.getconn(timeout=5))
        await asyncio.sleep(0.1)
        assert not waiting.done()
        await pool.putconn(first)
        second = await asyncio.wait_for(waiting, 5)
        assert second is first
        await pool.putconn(second)
        assert pool.get_stats()["pool_available"] == 1
    finally:
        await pool.close()


async def test_a_connection_given_back_in_a_transaction_is_rolled_back(database_url: str) -> None:
    pool = await open_pool(database_url, size=1, name="lineup-test-pool")
    try:
        conn = await pool.getconn()
        await conn.execute("BEGIN")
        await conn.execute("CREATE TEMPORARY TABLE left_open (x int)")
        await pool.putconn(conn)
        async with pool.connection() as again:
            assert again.pgconn.transaction_status == psycopg.pq.TransactionStatus.IDLE
            row = await (await again.execute("SELECT to_regclass('pg_temp.left_open') AS t")).fetchone()
            assert row == {"t": None}
    finally:
        await pool.close()


async def test_an_expired_connection_given_back_is_replaced(database_url: str) -> None:
    pool = await open_pool(database_url, size=1, name="lineup-test-pool")
    try:
        conn = await pool.getconn()
        pid = conn.info.backend_pid
        conn._expire_at = 0.0  # past its lifetime
        await pool.putconn(conn)
        assert conn.closed
        async with pool.connection(timeout=10) as fresh:
            assert fresh.info.backend_pid != pid
    finally:
        await pool.close()

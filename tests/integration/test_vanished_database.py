"""A database that vanished bounds what waits on it (docs/operations.md, "When the network fails"):
``/readyz`` answers 503 naming why instead of waiting on a connection that answers nothing; a tool
call that can get no connection answers the contract's 503 ``database_unavailable`` with
``Retry-After``, and sent again once the database is back it is decided once; every connection a
process makes carries the TCP bounds of its settings."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

from litestar.testing import AsyncTestClient

from harness.calls import start_body
from harness.database import tcp_address, with_hosts
from harness.processes import free_port
from service.app import create_app
from service.db.pool import open_pool
from service.manifests import Registry
from tests.conftest import AGENT, make_settings
from tests.support.tcp_proxy import ProxyThread

# An answer this late is a failure of the test, not a figure: it keeps a hang from hanging the suite.
NEVER = 60


async def test_readyz_answers_503_when_the_database_stops_answering(
    database_url: str, registry: Registry
) -> None:
    host, port = tcp_address(database_url)
    proxy = ProxyThread(host, port, free_port()).start()
    url = with_hosts(database_url, [("127.0.0.1", proxy.port)])
    app = create_app(make_settings(url, ready_check_timeout_seconds=0.5), registry, sweeper=False)
    try:
        async with AsyncTestClient(app=app) as client:
            assert (await client.get("/readyz")).status_code == 200
            proxy.freeze()  # the pooled connections stay open; what is sent on them goes nowhere
            answers = [await asyncio.wait_for(client.get("/readyz"), NEVER) for _ in range(3)]
            proxy.close()  # the probe's statement ends with its connection, before the stop
    finally:
        proxy.stop()
    assert [answer.status_code for answer in answers] == [503, 503, 503]
    assert {answer.json()["reason"] for answer in answers} == {"the database did not answer within 0.5 s"}


async def test_a_call_with_no_database_to_be_had_answers_503_and_once_it_is_back_is_decided_once(
    database_url: str, registry: Registry, db: Any
) -> None:
    host, port = tcp_address(database_url)
    proxy = ProxyThread(host, port, free_port()).start()
    url = with_hosts(database_url, [("127.0.0.1", proxy.port)])
    app = create_app(make_settings(url, db_unavailable_after_seconds=1), registry, sweeper=False)
    body = start_body("vanished", tool_call_id="vanished-start")
    try:
        async with AsyncTestClient(app=app) as client:
            proxy.close()  # every connection closed, the port refuses new ones
            gone = await asyncio.wait_for(client.post("/v1/tool-calls", json=body, headers=AGENT), NEVER)
            proxy.reopen()
            statuses = []
            for _ in range(40):  # the Agent sends it again, as Retry-After says, until answered
                again = await asyncio.wait_for(client.post("/v1/tool-calls", json=body, headers=AGENT), NEVER)
                statuses.append(again.status_code)
                if again.status_code != 503:
                    break
                await asyncio.sleep(0.25)
    finally:
        proxy.stop()
    assert gone.status_code == 503, gone.text
    assert gone.json()["error"] == "database_unavailable"
    assert gone.headers["retry-after"] == "1"
    assert statuses[-1] == 202, statuses
    row = db.execute("SELECT count(*) AS n FROM operations WHERE tool_call_id = 'vanished-start'").fetchone()
    assert row == {"n": 1}


async def test_every_pooled_connection_carries_the_tcp_bounds_of_its_settings(database_url: str) -> None:
    settings = make_settings(
        database_url,
        db_keepalives_idle_seconds=7,
        db_keepalives_interval_seconds=2,
        db_tcp_user_timeout_seconds=9,
    )
    tcp_address(database_url)  # over TCP (a Unix socket has no keepalives): skipped otherwise
    pool = await open_pool(settings.psycopg_url, size=1, name="lineup-test-pool")
    try:
        async with pool.connection() as conn:
            held = socket.socket(fileno=socket.dup(conn.pgconn.socket))
            try:
                options = (
                    held.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE),
                    held.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE),
                    held.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL),
                    held.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT),
                    held.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT),
                )
            finally:
                held.close()
    finally:
        await pool.close()
    assert options == (1, 7, 2, 3, 9000)

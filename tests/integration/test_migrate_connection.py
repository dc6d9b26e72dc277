"""``migrate`` waits a bounded time for its first connection, saying so at each try."""

from __future__ import annotations

import asyncio

import pytest

from harness.database import tcp_address
from harness.processes import free_port
from service.cli.migrate import wait_for_database
from service.settings import load_settings
from tests.support.tcp_proxy import TcpProxy


def test_migrate_gives_up_after_migrate_connect_seconds_naming_the_setting(
    capsys: pytest.CaptureFixture[str],
) -> None:
    port = free_port()  # nothing listens there
    settings = load_settings(
        database_url=f"postgresql://owner:Xk29fjqL0pZ7wqA@127.0.0.1:{port}/lineup",
        migrate_connect_seconds=0.5,
    )
    with pytest.raises(SystemExit) as gave_up:
        wait_for_database(settings, sleep=0.1)
    message = str(gave_up.value)
    assert "MIGRATE_CONNECT_SECONDS" in message and "Xk29" not in message
    tries = [
        line for line in capsys.readouterr().err.splitlines() if "cannot connect to the database yet" in line
    ]
    assert len(tries) >= 2  # one line per try
    assert all("trying again in" in line for line in tries)


async def test_migrate_connects_once_the_database_answers(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A port that refuses at first and forwards to Postgres later: migrate's wait ends there."""
    host, pg_port = tcp_address(database_url)
    port = free_port()
    url = database_url.replace(f":{pg_port}/", f":{port}/", 1)
    waiting = asyncio.create_task(
        asyncio.to_thread(
            wait_for_database, load_settings(database_url=url, migrate_connect_seconds=30), sleep=0.2
        )
    )
    await asyncio.sleep(0.7)  # refused until then: nothing listens yet
    proxy = await TcpProxy(host, pg_port, port).start()
    try:
        await asyncio.wait_for(waiting, 30)
    finally:
        await proxy.close()
    assert "cannot connect to the database yet (try 1" in capsys.readouterr().err

"""The one LISTEN loop (service.listen): it reconnects after any loss, wakes everyone once it
listens again, and leaves a node that stops answering for the next host of the URL."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import psycopg
import pytest

from harness.database import tcp_address, with_hosts
from harness.processes import free_port
from service import listen
from service.db.reconnect import Backoff
from service.listen import Listener
from tests.support.tcp_proxy import TcpProxy
from tests.support.waiting import until

CHANNEL = "lineup_test_channel"


class Recorder:
    def __init__(self) -> None:
        self.payloads: list[str] = []
        self.connects = 0

    def note(self, notify: psycopg.Notify) -> None:
        self.payloads.append(notify.payload)

    def connected(self) -> None:
        self.connects += 1


@pytest.fixture
async def running() -> AsyncIterator[Callable[[Listener], asyncio.Event]]:
    stops: list[tuple[asyncio.Event, asyncio.Task[None]]] = []

    def start(listener: Listener) -> asyncio.Event:
        stop = asyncio.Event()
        stops.append((stop, asyncio.create_task(listener.run(stop))))
        return stop

    yield start
    for stop, task in stops:
        stop.set()
        await asyncio.wait_for(task, 5)


def make_listener(url: str, recorder: Recorder, **options: Any) -> Listener:
    return Listener(
        url,
        [CHANNEL],
        on_notify=recorder.note,
        on_connect=recorder.connected,
        application_name="lineup-test-listener",
        backoff=Backoff(first=0.05, last=0.2),
        **options,
    )


async def test_a_terminated_listen_connection_reconnects_and_wakes_everyone(
    database_url: str, db: Any, running: Callable[[Listener], asyncio.Event]
) -> None:
    recorder = Recorder()
    listener = make_listener(database_url, recorder)
    running(listener)
    await until(listener.connected.is_set)
    assert recorder.connects == 1  # woken once on the first connect: a start misses nothing either
    db.execute(f"NOTIFY {CHANNEL}, 'one'")
    await until(lambda: recorder.payloads == ["one"])

    first_pid = listener.backend_pid
    db.execute("SELECT pg_terminate_backend(%s)", [first_pid])
    # Sent while nobody listens: lost. The wake-up after the reconnect is what covers it.
    db.execute(f"NOTIFY {CHANNEL}, 'lost'")
    await until(lambda: recorder.connects == 2)
    assert listener.backend_pid != first_pid
    db.execute(f"NOTIFY {CHANNEL}, 'two'")
    await until(lambda: recorder.payloads[-1:] == ["two"])
    assert "lost" not in recorder.payloads


async def test_the_stop_ends_the_wait_for_notifications_at_once(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One wait for notifications would last an hour: only a stop that cancels it ends the run.
    monkeypatch.setattr(listen, "QUIET_CHECK", 3600.0)
    recorder = Recorder()
    listener = make_listener(database_url, recorder)
    stop = asyncio.Event()
    task = asyncio.create_task(listener.run(stop))
    await until(listener.connected.is_set)
    stop.set()
    await asyncio.wait_for(task, 10.0)
    assert not listener.connected.is_set()


async def test_a_node_that_stops_answering_is_left_for_the_next_host(
    database_url: str, db: Any, running: Callable[[Listener], asyncio.Event]
) -> None:
    """The first host freezes (no FIN, no RST: a powered-off node): the heartbeat notices, and the
    reconnect's walk over the hosts gives up on it after connect_timeout and takes the second."""
    host, port = tcp_address(database_url)
    proxy = await TcpProxy(host, port, free_port()).start()
    try:
        url = with_hosts(database_url, [("127.0.0.1", proxy.port), (host, port)], connect_timeout="2")
        recorder = Recorder()
        listener = make_listener(url, recorder, heartbeat=0.5, heartbeat_timeout=1.0)
        running(listener)
        await until(listener.connected.is_set)
        through_proxy = listener.backend_pid
        connects = recorder.connects
        proxy.freeze()
        await until(lambda: recorder.connects > connects and listener.connected.is_set(), within=20)
        assert listener.backend_pid != through_proxy
        db.execute(f"NOTIFY {CHANNEL}, 'after'")
        await until(lambda: recorder.payloads == ["after"])
    finally:
        await proxy.close()

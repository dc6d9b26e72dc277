"""Behind a real PgBouncer (Debian's 1.18, which carries no prepared statements): the start-up probe
tells transaction pooling apart, ``serve`` and the relay work through it with
``DB_PREPARED_STATEMENTS=off`` (LISTEN replaced by polling), and refuse to start with prepares on,
naming the setting."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from harness.calls import interrupt_body, start_body
from harness.pgbouncer import PgBouncer, available, running_pgbouncer
from harness.processes import Child, RelayProcess, free_port
from harness.receiver import Receiver, new_secret
from service.db.pooler import transaction_pooling
from tests.conftest import AGENT, ServiceProcess
from tests.support.logs import named

pytestmark = pytest.mark.skipif(not available(), reason="needs pgbouncer (apt-get install pgbouncer)")


def started(service: ServiceProcess) -> ServiceProcess:
    """Started and ready, however long a busy machine takes."""
    Child.start(service)
    try:
        service.wait_ready(180)
    except BaseException:
        service.stop()
        raise
    return service


@pytest.fixture
def transaction_bouncer(database_url: str, tmp_path: Path) -> Iterator[PgBouncer]:
    with running_pgbouncer(database_url, mode="transaction", log_dir=tmp_path) as bouncer:
        yield bouncer


@pytest.fixture
def session_bouncer(database_url: str, tmp_path: Path) -> Iterator[PgBouncer]:
    with running_pgbouncer(database_url, mode="session", log_dir=tmp_path) as bouncer:
        yield bouncer


async def test_the_probe_finds_transaction_pooling_and_only_it(
    database_url: str, transaction_bouncer: PgBouncer, session_bouncer: PgBouncer
) -> None:
    for _ in range(10):
        assert await transaction_pooling(database_url) is False
        assert await transaction_pooling(session_bouncer.url(database_url)) is False
        assert await transaction_pooling(transaction_bouncer.url(database_url)) is True


def test_serve_and_relay_work_through_transaction_pooling_with_prepares_off(
    database_url: str, transaction_bouncer: PgBouncer, tmp_path: Path
) -> None:
    pooled = transaction_bouncer.url(database_url)
    service = started(ServiceProcess(pooled, tmp_path, DB_PREPARED_STATEMENTS="off"))
    secret = new_secret()
    with Receiver([secret]) as receiver:
        relay = RelayProcess(
            pooled,
            receiver.url,
            secret,
            tmp_path / "relay.log",
            {"DB_PREPARED_STATEMENTS": "off", "RELAY_METRICS_PORT": str(free_port())},
        ).start()
        try:
            relay.wait_ready(120)
            statuses = []
            starts = []
            # Each statement runs more than psycopg's automatic-prepare threshold (5 runs).
            for n in range(8):
                conversation = f"pooled-{n}-{uuid.uuid4()}"
                start = start_body(conversation, duration_seconds=60)
                stop = interrupt_body(conversation)
                for body in (start, stop):
                    answer = httpx.post(f"{service.base_url}/v1/tool-calls", json=body, headers=AGENT)
                    statuses.append(answer.status_code)
                starts.append(start["tool_call_id"])
            assert statuses == [202, 200] * 8
            # One result per operation (its interruption), each delivered once.
            delivered = receiver.wait_until(lambda deliveries: len(deliveries) >= len(starts), timeout=60)
            assert sorted(d.payload["tool_call_id"] for d in delivered) == sorted(starts)
            assert httpx.get(f"{service.base_url}/readyz").status_code == 200
        finally:
            relay.stop()
            service.stop()
    service_log = service.log.read_text()
    assert named(service_log, "projections_polling"), "no session behind the pooler: projections poll"
    assert not named(service_log, "internal_error")
    assert "prepared statement" not in service_log + relay.log.read_text()
    assert '"poll_only": true' in relay.log.read_text() or '"poll_only":true' in relay.log.read_text()


def test_serve_and_relay_refuse_prepares_behind_transaction_pooling(
    database_url: str, transaction_bouncer: PgBouncer, tmp_path: Path
) -> None:
    pooled = transaction_bouncer.url(database_url)
    service = ServiceProcess(pooled, tmp_path)
    relay = RelayProcess(pooled, "http://127.0.0.1:9/", new_secret(), tmp_path / "relay.log")
    for process, log in ((service, service.log), (relay, relay.log)):
        Child.start(process)  # not ServiceProcess.start, which waits for /healthz
        assert process.process is not None
        try:
            code = process.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.stop()
            raise
        assert code == 2, log.read_text()[-2000:]
        assert "set DB_PREPARED_STATEMENTS=off" in log.read_text()


def test_session_pooling_keeps_prepares_and_listen(
    database_url: str, session_bouncer: PgBouncer, tmp_path: Path
) -> None:
    service = started(ServiceProcess(session_bouncer.url(database_url), tmp_path))
    try:
        for n in range(6):
            body = start_body(f"session-{n}-{uuid.uuid4()}", duration_seconds=60)
            answer = httpx.post(f"{service.base_url}/v1/tool-calls", json=body, headers=AGENT)
            assert answer.status_code == 202
    finally:
        service.stop()
    assert not named(service.log.read_text(), "projections_polling")

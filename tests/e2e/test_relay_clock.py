"""A relay whose host clock is an hour off (libfaketime, Debian's ``faketime``) still stamps every
webhook with the database's clock: a Standard Webhooks receiver (five minutes' tolerance) accepts
each delivery at once, the attempts' ``started_at`` are the database's, and the relay says how far
off its host is (a gauge and a log line)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from harness.faketime import faked, library
from harness.processes import free_port, spawn, stop, wait_http
from harness.receiver import Receiver, always, new_secret
from tests.support.outbox import attempt_rows, queue_across

pytestmark = pytest.mark.e2e


@pytest.mark.skipif(
    library() is None, reason="libfaketime is not installed (Debian: apt-get install faketime)"
)
@pytest.mark.parametrize("shift", ["+1h", "-1h"])
def test_a_relay_an_hour_off_signs_with_the_database_clock(
    database_url: str, db: psycopg.Connection[dict[str, Any]], tmp_path: Path, shift: str
) -> None:
    secret = new_secret()
    port = free_port()
    with Receiver([secret], responder=always(204)) as agent:
        relay = spawn(
            ["-m", "relay"],
            {
                "DATABASE_URL": database_url,
                "AGENT_WEBHOOK_URL": agent.url,
                "WEBHOOK_SECRET": secret,
                "RELAY_ID": "relay-skewed",
                "RELAY_POLL_INTERVAL_SECONDS": "0.2",
                "RELAY_METRICS_HOST": "127.0.0.1",
                "RELAY_METRICS_PORT": str(port),
                # The host's wall clock an hour off; its monotonic clock as it is.
                **faked(shift),
            },
            tmp_path / "relay.log",
        )
        try:
            wait_http(f"http://127.0.0.1:{port}/readyz", process=relay)
            queued = queue_across(db, conversations=3, per_conversation=2)
            delivered = agent.wait_for_accepted({q.event_id for q in queued}, timeout=20)
            metrics = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
        finally:
            stop(relay)
    log = (tmp_path / "relay.log").read_text(errors="replace")

    # Every delivery verified under the receiver's tolerance, at its first attempt.
    assert all(d.verified_by == (0,) for d in delivered), "a webhook stamped with the host's clock"
    assert {d.event_id for d in delivered} == {q.event_id for q in queued}
    assert len(delivered) == len(queued), "deliveries were refused and retried"
    for d in delivered:
        stamped = int(d.headers["webhook-timestamp"])
        assert abs(stamped - d.arrived_at) < 5, f"webhook-timestamp {stamped} is not the database's time"

    # The attempts' started_at are the database's clock too.
    database_now = db.execute("SELECT extract(epoch FROM now()) AS t").fetchone()
    assert database_now is not None
    for q in queued:
        (attempt,) = attempt_rows(db, q.event_id)
        assert abs(attempt["started_at"].timestamp() - float(database_now["t"])) < 60

    # And the relay says how far off its host is.
    offset = re.search(r"^lineup_relay_clock_offset_seconds (\S+)$", metrics, re.MULTILINE)
    assert offset is not None, metrics[-2000:]
    expected = 3600.0 if shift.startswith("+") else -3600.0
    assert abs(float(offset.group(1)) - expected) < 5
    assert "relay_clock_skew" in log


def test_a_relay_on_time_reports_no_skew(
    database_url: str, db: psycopg.Connection[dict[str, Any]], tmp_path: Path
) -> None:
    secret = new_secret()
    port = free_port()
    with Receiver([secret], responder=always(204)) as agent:
        relay = spawn(
            ["-m", "relay"],
            {
                "DATABASE_URL": database_url,
                "AGENT_WEBHOOK_URL": agent.url,
                "WEBHOOK_SECRET": secret,
                "RELAY_ID": "relay-on-time",
                "RELAY_POLL_INTERVAL_SECONDS": "0.2",
                "RELAY_METRICS_HOST": "127.0.0.1",
                "RELAY_METRICS_PORT": str(port),
            },
            tmp_path / "relay.log",
        )
        try:
            wait_http(f"http://127.0.0.1:{port}/readyz", process=relay)
            queued = queue_across(db, conversations=2, per_conversation=1)
            agent.wait_for_accepted({q.event_id for q in queued}, timeout=20)
            metrics = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
        finally:
            stop(relay)
    offset = re.search(r"^lineup_relay_clock_offset_seconds (\S+)$", metrics, re.MULTILINE)
    assert offset is not None
    assert abs(float(offset.group(1))) < 1
    assert "relay_clock_skew" not in (tmp_path / "relay.log").read_text(errors="replace")

"""The relay's probe port: off unless set, so relays on one host never collide; a taken port is one
clear line of error, never a traceback."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest

from harness.processes import ROOT, stop
from harness.receiver import Receiver, always, new_secret
from tests.support.logs import named
from tests.support.outbox import outbox_rows, queue_across, wait_until

pytestmark = pytest.mark.e2e

Db = psycopg.Connection[dict[str, Any]]


def relay_process(
    database_url: str, agent_url: str, secret: str, log: Path, *, stderr: Any = subprocess.STDOUT, **env: str
) -> Any:
    """``python -m relay`` with exactly these settings: nothing inherited names a probe port."""
    base = {key: value for key, value in os.environ.items() if not key.startswith("RELAY_")}
    settings = {
        **base,
        "DATABASE_URL": database_url,
        "AGENT_WEBHOOK_URL": agent_url,
        "WEBHOOK_SECRET": secret,
        "RELAY_POLL_INTERVAL_SECONDS": "0.2",
        **env,
    }
    with log.open("ab") as handle:
        return subprocess.Popen(
            [sys.executable, "-m", "relay"], cwd=ROOT, env=settings, stdout=handle, stderr=stderr
        )


def test_relays_with_default_settings_run_side_by_side_on_one_host(
    database_url: str, db: Db, tmp_path: Path
) -> None:
    secret = new_secret()
    with Receiver([secret], responder=always(204)) as agent:
        relays = [relay_process(database_url, agent.url, secret, tmp_path / f"r{i}.log") for i in (1, 2, 3)]
        try:
            queued = queue_across(db, conversations=12, per_conversation=2)
            agent.wait_for_accepted({q.event_id for q in queued}, timeout=30)
            wait_until(lambda: all(r["status"] == "delivered" for r in outbox_rows(db).values()), timeout=10)
            # One relay may have delivered everything before the others were up: SIGTERM only relays
            # that have started (and so handle it).
            wait_until(
                lambda: all(named((tmp_path / f"r{i}.log").read_text(), "relay_started") for i in (1, 2, 3)),
                timeout=30,
            )
            assert [relay.poll() for relay in relays] == [None, None, None]
        finally:
            codes = [stop(relay) for relay in relays]
    assert codes == [0, 0, 0]
    for index in (1, 2, 3):
        [started] = named((tmp_path / f"r{index}.log").read_text(), "relay_started")
        assert started["probe_port"] is None


def test_a_taken_probe_port_stops_the_relay_with_one_line_naming_it(
    database_url: str, tmp_path: Path
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        relay = relay_process(
            database_url,
            "http://127.0.0.1:9/",
            new_secret(),
            tmp_path / "relay.log",
            stderr=subprocess.PIPE,
            RELAY_METRICS_PORT=str(port),
        )
        _, stderr = relay.communicate(timeout=30)
    assert relay.returncode == 2
    lines = stderr.decode().strip().splitlines()
    assert len(lines) == 1, stderr.decode()
    assert lines[0].startswith(f"error: RELAY_METRICS_PORT: cannot listen on 127.0.0.1:{port}")
    assert "already in use" in lines[0]
    assert "Traceback" not in (tmp_path / "relay.log").read_text()

"""SIGKILL the service while operations fall due: after a restart each is settled exactly once."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from harness.calls import start_body
from tests.conftest import AGENT

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

OPERATIONS = 60


def _wait_until_settled(db: Any, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    focusing = -1
    while time.monotonic() < deadline:
        focusing = db.execute("SELECT count(*) AS n FROM operations WHERE state = 'focusing'").fetchone()["n"]
        if focusing == 0:
            return 0
        time.sleep(0.05)
    return int(focusing)


def test_operations_due_while_the_service_was_killed_settle_exactly_once_after_restart(
    service_process: Any, db: Any
) -> None:
    first = service_process()
    with httpx.Client(base_url=first.base_url, timeout=10) as client:
        for index in range(OPERATIONS):
            body = start_body(f"crash-{index}", duration_seconds=1 + index % 3)
            assert client.post("/v1/tool-calls", json=body, headers=AGENT).status_code == 202
    time.sleep(1.2)  # the 1-second periods fall due and the sweeper is at work on them
    first.kill()
    settled_before_kill = db.execute(
        "SELECT count(*) AS n FROM operations WHERE state <> 'focusing'"
    ).fetchone()["n"]
    time.sleep(2.5)  # everything else falls due while no service runs
    assert db.execute("SELECT count(*) AS n FROM operations WHERE state = 'focusing'").fetchone()["n"] > 0

    service_process()
    assert _wait_until_settled(db, timeout=15) == 0

    rows = db.execute(
        "SELECT o.state, o.reason, o.lateness_ms, count(x.event_id) AS results"
        " FROM operations o LEFT JOIN outbox x ON x.tool_call_id = o.tool_call_id"
        " GROUP BY o.operation_id, o.state, o.reason, o.lateness_ms"
    ).fetchall()
    assert len(rows) == OPERATIONS
    assert {(r["state"], r["reason"]) for r in rows} == {("completed", "deadline_reached")}
    assert [r["results"] for r in rows] == [1] * OPERATIONS
    assert db.execute("SELECT count(*) AS n FROM outbox").fetchone()["n"] == OPERATIONS
    late = [r["lateness_ms"] for r in rows if r["lateness_ms"] > 1000]
    # The ones that fell due during the outage were settled late, once, by the new process.
    assert len(late) >= OPERATIONS - settled_before_kill - 5
    assert db.execute("SELECT count(*) AS n FROM app_instances WHERE status = 'open'").fetchone()["n"] == 0
    assert (
        db.execute(
            "SELECT count(*) AS n FROM workspaces WHERE foreground_instance_id IS NOT NULL"
        ).fetchone()["n"]
        == 0
    )
    print(
        f"\ncrash test: {settled_before_kill} settled before SIGKILL, {OPERATIONS - settled_before_kill} after restart"
    )

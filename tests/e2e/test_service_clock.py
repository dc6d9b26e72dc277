"""``serve`` on a host whose clock is an hour off (libfaketime, Debian's ``faketime``): the database's
clock decides, so a Pomodoro completes neither early nor never, and the service says how far off
its host is — ``lineup_clock_offset_seconds`` and a ``clock_skew`` line (docs/design.md, "The
clocks that matter"). ``make clocks`` times the same under load, drifting clocks among them."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import httpx
import psycopg
import pytest

from harness.calls import start_body
from harness.faketime import faked, library
from tests.conftest import AGENT, ServiceProcess

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(library() is None, reason="libfaketime is not installed (apt-get install faketime)"),
]


@pytest.mark.parametrize("shift", ["+1h", "-1h"])
def test_serve_an_hour_off_decides_by_the_database_clock_and_says_so(
    service_process: Callable[..., ServiceProcess], db: psycopg.Connection[dict[str, Any]], shift: str
) -> None:
    service = service_process(**faked(shift))
    with httpx.Client(base_url=service.base_url, timeout=15) as client:
        started = client.post("/v1/tool-calls", json=start_body("skewed", duration_seconds=1), headers=AGENT)
        assert started.status_code == 202, started.text
        operation_id = started.json()["operation"]["operation_id"]
        row: dict[str, Any] | None = None
        for _ in range(300):  # the sweeper settles it; polled, not timed
            row = db.execute(
                "SELECT state, finalized_at >= ends_at AS on_time, ends_at - started_at AS length"
                " FROM operations WHERE operation_id = %s",
                (operation_id,),
            ).fetchone()
            if row is not None and row["state"] != "focusing":
                break
            time.sleep(0.1)
        metrics = client.get("/metrics").text
    assert row is not None and row["state"] == "completed", row
    assert row["on_time"], "completed before its ends_at"
    assert row["length"].total_seconds() == 1  # ends_at is the database's start plus the duration
    offset = re.search(r"^lineup_clock_offset_seconds (\S+)$", metrics, re.MULTILINE)
    assert offset is not None, metrics[-2000:]
    expected = 3600.0 if shift.startswith("+") else -3600.0
    assert abs(float(offset.group(1)) - expected) < 5
    service.stop()
    assert '"clock_skew"' in service.log.read_text(errors="replace")


def test_serve_on_time_reports_no_skew(
    service_process: Callable[..., ServiceProcess], db: psycopg.Connection[dict[str, Any]]
) -> None:
    service = service_process()
    with httpx.Client(base_url=service.base_url, timeout=15) as client:
        metrics = client.get("/metrics").text
    offset = re.search(r"^lineup_clock_offset_seconds (\S+)$", metrics, re.MULTILINE)
    assert offset is not None
    assert abs(float(offset.group(1))) < 1
    service.stop()
    assert '"clock_skew"' not in service.log.read_text(errors="replace")

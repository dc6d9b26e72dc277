"""The service's database connections are cut (pg_terminate_backend): it reconnects and carries on."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from harness.calls import interrupt_body, start_body
from tests.conftest import AGENT, HOST

pytestmark = pytest.mark.e2e


def terminate_service_connections(db: Any) -> int:
    rows = db.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
        " WHERE datname = current_database() AND application_name LIKE 'lineup-%%' AND pid <> pg_backend_pid()"
    ).fetchall()
    return len(rows)


def test_tool_calls_and_deadlines_survive_terminated_connections(service_process: Any, db: Any) -> None:
    service = service_process()
    with httpx.Client(base_url=service.base_url, timeout=15) as client:
        assert client.post("/v1/tool-calls", json=start_body("before"), headers=AGENT).status_code == 202
        assert terminate_service_connections(db) >= 3  # pooled, sweeper and projection listeners
        # The pooled connections are dead: the call is retried on a fresh one, never a 500.
        for index in range(5):
            response = client.post("/v1/tool-calls", json=start_body(f"after-{index}"), headers=AGENT)
            assert response.status_code == 202, response.text
        assert (
            client.post("/v1/tool-calls", json=interrupt_body("before"), headers=AGENT).json()["status"]
            == "interrupted"
        )
        # The sweeper's listener reconnects too: a new deadline is still settled on time.
        started = client.post(
            "/v1/tool-calls", json=start_body("deadline", duration_seconds=1), headers=AGENT
        ).json()
        deadline = time.monotonic() + 10
        state = "focusing"
        while time.monotonic() < deadline and state == "focusing":
            state = db.execute(
                "SELECT state FROM operations WHERE operation_id = %s", [started["operation"]["operation_id"]]
            ).fetchone()["state"]
            time.sleep(0.1)
        assert state == "completed"


def test_host_reads_after_terminated_connections_are_never_a_500(service_process: Any, db: Any) -> None:
    service = service_process()
    with httpx.Client(base_url=service.base_url, timeout=15) as client:
        assert client.get("/v1/host/conversations/c/workspace", headers=HOST).status_code == 200
        terminate_service_connections(db)
        statuses = [
            client.get("/v1/host/conversations/c/workspace", headers=HOST).status_code for _ in range(6)
        ]
    assert set(statuses) <= {200, 503}
    assert statuses[-1] == 200

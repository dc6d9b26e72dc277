"""Health, readiness, metrics and structured logs of the running service; no secret ever logged."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import pytest

from harness.calls import interrupt_body, start_body
from service.version import __version__
from tests.conftest import AGENT, AGENT_TOKEN, HOST, HOST_TOKEN, OPERATOR, OPERATOR_TOKEN

pytestmark = pytest.mark.e2e


def test_metrics_count_tool_calls_and_decisions_and_logs_carry_ids_but_no_secrets(
    service_process: Any, db: Any
) -> None:
    service = service_process()
    with httpx.Client(base_url=service.base_url, timeout=10) as client:
        assert client.get("/healthz").json() == {"status": "ok", "version": __version__}
        assert client.get("/readyz").json()["status"] == "ready"
        started = client.post("/v1/tool-calls", json=start_body("conv-m"), headers=AGENT).json()
        client.post("/v1/tool-calls", json=interrupt_body("conv-m"), headers=AGENT)
        client.post("/v1/tool-calls", json=interrupt_body("conv-m", instance_id="x"), headers=AGENT)
        client.get("/v1/tools", headers={"Authorization": "Bearer not-a-real-token-1234"})
        client.get("/v1/host/conversations/conv-m/workspace", headers=HOST)
        time.sleep(0.2)
        text = client.get("/metrics", headers=OPERATOR).text
    assert 'lineup_tool_calls_total{outcome="accepted",tool="pomodoro.start"} 1.0' in text
    assert 'lineup_tool_calls_total{outcome="interrupted",tool="pomodoro.interrupt"} 1.0' in text
    assert 'lineup_tool_calls_total{outcome="invalid_arguments",tool="pomodoro.interrupt"} 1.0' in text
    assert 'lineup_terminal_decisions_total{reason="agent_interrupt",state="interrupted"} 1.0' in text
    assert "lineup_deadline_lateness_seconds_bucket" in text
    assert "lineup_outbox_rows" in text
    service.stop()
    log = service.log.read_text()
    for secret in (AGENT_TOKEN, HOST_TOKEN, OPERATOR_TOKEN, "not-a-real-token-1234"):
        assert secret not in log
    events = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    calls = [e for e in events if e.get("event") == "tool_call"]
    assert {e["tool_call_id"] for e in calls} >= {started["tool_call_id"]}
    assert all("conversation_id" in e and "level" in e and "timestamp" in e for e in calls)
    settled = [e for e in events if e.get("event") == "operation_settled"]
    assert settled[0]["operation_id"] == started["operation"]["operation_id"]
    assert settled[0]["tool_call_id"].startswith("interrupt-")  # bound by the interrupt call
    assert settled[0]["event_id"]


def test_readyz_is_503_when_migrations_are_not_at_head(service_process: Any, db: Any) -> None:
    service = service_process()
    db.execute("UPDATE alembic_version SET version_num = '0001'")
    response = httpx.get(f"{service.base_url}/readyz", timeout=5)
    assert response.status_code == 503
    assert "0001" in response.json()["reason"]

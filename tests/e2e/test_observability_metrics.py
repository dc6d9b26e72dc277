"""Every metric the alert rules and the Grafana dashboard (deploy/observability) query is exported
by a real ``python -m service serve`` or ``python -m relay``, read from their /metrics after some
traffic: a typo or a renamed metric would leave an alert that can never fire."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from harness.processes import free_port, spawn, stop, wait_http
from harness.receiver import Receiver, new_secret
from tests.conftest import AGENT, OPERATOR, ServiceProcess
from tests.support.browser import eventually
from tests.support.promql import PROMETHEUS_SERIES, queried_metrics

pytestmark = pytest.mark.e2e

# The samples a metric family of each type exposes.
SUFFIXES = {
    "counter": ("_total", "_created"),
    "gauge": ("",),
    "histogram": ("_bucket", "_count", "_sum", "_created"),
    "summary": ("", "_count", "_sum", "_created"),
    "info": ("_info",),
}


def exported(text: str) -> set[str]:
    """Every sample name a /metrics text declares (a labelled family without samples yet included)."""
    names: set[str] = set()
    for family in text_string_to_metric_families(text):
        names |= {family.name + suffix for suffix in SUFFIXES.get(family.type, ("",))}
        names |= {sample.name for sample in family.samples}
    return names


@pytest.fixture
def relay_metrics(database_url: str, tmp_path: Path) -> Iterator[str]:
    secret = new_secret()
    port = free_port()
    with Receiver([secret]) as receiver:
        env = {
            "DATABASE_URL": database_url,
            "AGENT_WEBHOOK_URL": receiver.url,
            "WEBHOOK_SECRET": secret,
            "RELAY_METRICS_PORT": str(port),
            "RELAY_POLL_INTERVAL_SECONDS": "0.2",
        }
        relay = spawn(["-m", "relay"], env, tmp_path / "relay.log")
        try:
            wait_http(f"http://127.0.0.1:{port}/readyz", process=relay)
            yield f"http://127.0.0.1:{port}"
        finally:
            stop(relay)


def call(base_url: str, tool: str, conversation_id: str, arguments: dict[str, Any]) -> None:
    body = {
        "tool_call_id": f"m-{uuid.uuid4()}",
        "conversation_id": conversation_id,
        "tool": tool,
        "arguments": arguments,
    }
    httpx.post(f"{base_url}/v1/tool-calls", json=body, headers=AGENT, timeout=10)


def test_every_metric_the_rules_and_the_dashboard_query_is_exported(
    service_process: Any, relay_metrics: str
) -> None:
    service: ServiceProcess = service_process()
    call(service.base_url, "pomodoro.start", "metrics-1", {"duration_seconds": 1500})
    call(service.base_url, "pomodoro.interrupt", "metrics-1", {})
    call(service.base_url, "pomodoro.start", "metrics-2", {"duration_seconds": 1})
    eventually(
        lambda: (
            "lineup_relay_commit_to_delivery_seconds_count 2.0" in httpx.get(f"{relay_metrics}/metrics").text
        ),
        15,
    )

    from_service = exported(httpx.get(f"{service.base_url}/metrics", headers=OPERATOR, timeout=10).text)
    from_relay = exported(httpx.get(f"{relay_metrics}/metrics", timeout=10).text)
    queried = queried_metrics()
    assert len(queried) >= 10  # the extraction found the queries
    missing = {
        name: sorted(where)
        for name, where in queried.items()
        if name not in from_service | from_relay | PROMETHEUS_SERIES
    }
    assert missing == {}
    # Both processes report whether they reach the database, as the alert expects.
    assert "lineup_database_reachable" in from_service & from_relay

"""5xx answers are counted by API, for the tool-call 5xx alert (deploy/observability/alerts.yml)."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY

from service.metrics import api_of, count_server_error


@pytest.mark.parametrize(
    ("path", "api"),
    [
        ("/v1/tool-calls", "tools"),
        ("/v1/operations/x", "tools"),
        ("/v1/host/conversations/c/workspace", "host"),
        ("/v1/sdk/state", "sdk"),
        ("/v1/ops/outbox", "ops"),
        ("/mcp", "mcp"),
        ("/readyz", "probes"),
        ("/ops/", "web"),
        ("/host/", "web"),
    ],
)
def test_a_path_belongs_to_its_api(path: str, api: str) -> None:
    assert api_of(path) == api


def test_only_5xx_answers_are_counted() -> None:
    def value(status: str) -> float:
        sample = REGISTRY.get_sample_value(
            "lineup_http_server_errors_total", {"api": "tools", "status": status}
        )
        return sample or 0.0

    before_503, before_404 = value("503"), value("404")
    count_server_error("/v1/tool-calls", 503)
    count_server_error("/v1/tool-calls", 404)
    assert value("503") == before_503 + 1
    assert value("404") == before_404 == 0.0

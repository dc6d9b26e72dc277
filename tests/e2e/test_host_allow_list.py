"""The fourth security review's Host finding, black-box against a real ``python -m service serve``
on loopback: a DNS-rebinding page (``Host: rebind.attacker``) no longer reads ``/metrics`` or any
token-less endpoint, while the probes of every deployment (loopback, a pod's IP, the compose
service's name through ``ALLOWED_HOSTS``) keep working."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.conftest import AGENT

pytestmark = pytest.mark.e2e

TOKENLESS = [
    ("GET", "/metrics"),
    ("GET", "/healthz"),
    ("GET", "/readyz"),
    ("GET", "/host/"),
    ("GET", "/host/main.js"),
    ("GET", "/ops/"),
]


def test_a_rebinding_host_is_refused_on_every_tokenless_endpoint_and_probes_still_answer(
    service_process: Any,
) -> None:
    service = service_process(ALLOWED_HOSTS="service, *.svc.cluster.local")
    port = service.base_url.rsplit(":", 1)[1]
    with httpx.Client(base_url=service.base_url, timeout=10) as client:
        rebound = {
            path: client.request(method, path, headers={"Host": f"rebind.attacker:{port}"})
            for method, path in TOKENLESS
        }
        preview = client.post(
            "/host/session/preview",
            json={"token": "x"},
            headers={"Host": "rebind.attacker", "Sec-Fetch-Site": "same-origin"},
        )
        sign_in = client.post(
            "/ops/session", data={"token": "x"}, headers={"Host": f"rebind.attacker:{port}"}
        )
        allowed = {
            host: client.get("/metrics", headers={"Host": host})
            for host in (
                f"127.0.0.1:{port}",  # PUBLIC_ORIGIN's host, the image's HEALTHCHECK
                f"localhost:{port}",
                f"[::1]:{port}",
                "10.42.0.17:8000",  # a Kubernetes probe: Host = the pod's IP
                "service:8000",  # Compose's Prometheus, named in ALLOWED_HOSTS
                "lineup.ns.svc.cluster.local",
            )
        }
        near_misses = {
            host: client.get("/healthz", headers={"Host": host})
            for host in (
                "service.attacker",
                "svc.cluster.local.attacker",
                "127.0.0.1.nip.io",
                "localhost.attacker",
            )
        }
        # Endpoints that take a token are not the allow-list's: the token is the guard there.
        tools = client.get("/v1/tools", headers={**AGENT, "Host": "rebind.attacker"})
    for path, answer in rebound.items():
        assert answer.status_code == 421, (path, answer.status_code, answer.text[:200])
        assert answer.json()["error"] == "misdirected_request", path
        assert "lineup_" not in answer.text
    assert preview.status_code == 421 and preview.json()["error"] == "misdirected_request"
    assert sign_in.status_code == 421 and sign_in.json()["error"] == "misdirected_request"
    for host, answer in allowed.items():
        assert answer.status_code == 200 and "lineup_tool_calls_total" in answer.text, host
    for host, answer in near_misses.items():
        assert answer.status_code == 421, host
    assert tools.status_code == 200

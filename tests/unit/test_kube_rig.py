"""rigs/kube.py's rewrite of the rendered dev overlay for Podman on the host's network: every port
a process listens on, is probed on or is called on moves together, and the Services' names become
127.0.0.1, so what the rig plays is the rendered objects with those two changes only."""

from __future__ import annotations

from typing import Any

import pytest

from harness import kube
from rigs.kube import Ports, config_on_host, job_as_pod, on_host_network


@pytest.fixture(scope="module")
def rendered() -> dict[str, list[dict[str, Any]]]:
    try:
        kubectl = kube.find_kubectl()
    except kube.KubectlMissingError as exc:
        pytest.skip(str(exc))
    return {stage: kube.render(kube.overlay_path("dev", stage), kubectl) for stage in kube.STAGES}


def deployment(objects: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == name)


def test_ports_probes_and_urls_move_together(rendered: dict[str, list[dict[str, Any]]]) -> None:
    app = rendered["app"]
    services = sorted(o["metadata"]["name"] for o in app if o["kind"] == "Service")
    ports = Ports(services, 8000, 8200, 9100)
    service = on_host_network(deployment(app, "lineup-service"), ports)["spec"]["template"]["spec"]
    (container,) = service["containers"]
    listen = int(container["command"][container["command"].index("--port") + 1])
    assert listen == ports.map[8000] != 8000
    assert {container[k]["httpGet"]["port"] for k in ("startupProbe", "readinessProbe", "livenessProbe")} == {
        listen
    }
    assert "ports" not in container and service["hostNetwork"] is True

    relay = on_host_network(deployment(app, "lineup-relay"), ports)["spec"]["template"]["spec"]["containers"][
        0
    ]
    metrics = int(next(e["value"] for e in relay["env"] if e["name"] == "RELAY_METRICS_PORT"))
    assert metrics == ports.map[9100]
    assert {relay[k]["httpGet"]["port"] for k in ("startupProbe", "readinessProbe", "livenessProbe")} == {
        metrics
    }

    agent = on_host_network(deployment(app, "lineup-demo-agent"), ports)["spec"]["template"]["spec"][
        "containers"
    ][0]
    agent_port = int(agent["command"][agent["command"].index("--port") + 1])
    assert agent_port == ports.map[8200]
    lineup_url = next(e["value"] for e in agent["env"] if e["name"] == "LINEUP_URL")
    assert lineup_url == f"http://127.0.0.1:{listen}"

    (config,) = [config_on_host(o, ports) for o in app if o["kind"] == "ConfigMap"]
    assert config["data"]["AGENT_WEBHOOK_URL"] == f"http://127.0.0.1:{agent_port}/webhooks/lineup"


def test_a_job_is_played_as_a_pod_of_its_template(rendered: dict[str, list[dict[str, Any]]]) -> None:
    for job in (o for o in rendered["schema"] if o["kind"] == "Job"):
        pod = job_as_pod(job)
        assert pod["kind"] == "Pod" and pod["metadata"]["name"] == job["metadata"]["name"]
        assert pod["spec"] == job["spec"]["template"]["spec"]

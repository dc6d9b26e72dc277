"""deploy/kubernetes/ as ``kubectl kustomize`` renders each overlay: every object valid against the
Kubernetes 1.33-1.35 schemas (strict, offline), and what operators rely on — non-root read-only
containers, probes on the ports and paths the processes answer, pinned images, resources, the
schema Jobs as a step of their own before the Deployments, each process with only its own
Secrets, the alert rules equal to deploy/observability/alerts.yml."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness import kube
from service.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
Obj = dict[str, Any]
Rendered = dict[tuple[str, str], list[Obj]]


@pytest.fixture(scope="module")
def rendered() -> Rendered:
    try:
        kubectl = kube.find_kubectl()
    except kube.KubectlMissingError as exc:
        pytest.skip(str(exc))
    return kube.render_all(kubectl)


def every(rendered: Rendered) -> Iterator[tuple[str, Obj]]:
    for (overlay, stage), objects in rendered.items():
        for obj in objects:
            yield f"{overlay}/{stage} {obj['kind']}/{obj['metadata']['name']}", obj


def workloads(rendered: Rendered) -> Iterator[tuple[str, Obj]]:
    for where, obj in every(rendered):
        if obj["kind"] in ("Deployment", "Job"):
            yield where, obj


def named(objects: list[Obj], kind: str, name: str) -> Obj:
    return next(o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name)


def pod(obj: Obj) -> Obj:
    spec: Obj = obj["spec"]["template"]["spec"]
    return spec


def env_of(container: Obj) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in container.get("env", [])}


# -- schemas ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", kube.KUBERNETES_VERSIONS)
def test_every_object_validates_strictly_against_the_kubernetes_schemas(
    rendered: Rendered, version: str
) -> None:
    errors = [
        e
        for _, obj in every(rendered)
        if not kube.is_custom(obj)
        for e in kube.validation_errors(obj, version)
    ]
    assert errors == []


def test_strict_validation_refuses_a_misspelt_field(rendered: Rendered) -> None:
    deployment = named(rendered[("production", "app")], "Deployment", "lineup-service")
    broken = yaml.safe_load(yaml.safe_dump(deployment))
    pod(broken)["containers"][0]["readinessProbe"]["httpGet"]["paht"] = "/readyz"
    assert kube.validation_errors(broken, "1.34.0") != []


def test_every_overlay_renders_what_it_promises(rendered: Rendered) -> None:
    kinds = {key: sorted({o["kind"] for o in objects}) for key, objects in rendered.items()}
    for overlay in kube.OVERLAYS:
        assert kinds[(overlay, "schema")] == ["Job", "NetworkPolicy", "ServiceAccount"]
        app = {(o["kind"], o["metadata"]["name"]) for o in rendered[(overlay, "app")]}
        for kind in ("Deployment", "Service", "PodDisruptionBudget", "NetworkPolicy"):
            assert {(kind, "lineup-service"), (kind, "lineup-relay")} <= app, (overlay, kind)
        assert ("ConfigMap", "lineup-config") not in app  # generated: its name carries a hash
        assert any(k == "ConfigMap" and n.startswith("lineup-config-") for k, n in app)
    assert ("Deployment", "lineup-demo-agent") in {
        (o["kind"], o["metadata"]["name"]) for o in rendered[("dev", "app")]
    }
    production = {o["kind"] for o in rendered[("production", "app")]}
    assert {"HorizontalPodAutoscaler", "ServiceMonitor", "PrometheusRule"} <= production
    assert "lineup-demo-agent" not in {o["metadata"]["name"] for o in rendered[("production", "app")]}


# -- least privilege -------------------------------------------------------------------------------


def test_every_container_runs_as_the_images_user_read_only_without_capabilities(rendered: Rendered) -> None:
    for where, obj in workloads(rendered):
        spec = pod(obj)
        security = spec["securityContext"]
        assert security["runAsNonRoot"] is True, where
        assert security["runAsUser"] == 10001 and security["runAsGroup"] == 10001, where
        assert security["seccompProfile"] == {"type": "RuntimeDefault"}, where
        assert spec["automountServiceAccountToken"] is False, where
        for container in kube.containers(obj):
            own = container["securityContext"]
            assert own["readOnlyRootFilesystem"] is True, where
            assert own["allowPrivilegeEscalation"] is False, where
            assert own["runAsNonRoot"] is True, where
            assert own["capabilities"] == {"drop": ["ALL"]}, where
            # The only writable place is an emptyDir on /tmp.
            volumes = {v["name"]: v for v in spec.get("volumes", [])}
            for mount in container.get("volumeMounts", []):
                assert "emptyDir" in volumes[mount["name"]], where
            assert [m["mountPath"] for m in container.get("volumeMounts", [])] == ["/tmp"], where


def test_the_dockerfile_user_is_the_one_the_manifests_run_as() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "--uid 10001" in dockerfile and "--gid 10001" in dockerfile


def secrets_of(container: Obj) -> set[str]:
    names = {ref["secretRef"]["name"] for ref in container.get("envFrom", []) if "secretRef" in ref}
    names |= {
        e["valueFrom"]["secretKeyRef"]["name"]
        for e in container.get("env", [])
        if "secretKeyRef" in e.get("valueFrom", {})
    }
    return names


def test_each_process_reads_only_its_own_secrets_and_no_secret_is_in_the_files(rendered: Rendered) -> None:
    expected = {
        "lineup-roles": {"lineup-db-admin"},
        "lineup-migrate": {"lineup-db-owner"},
        "lineup-service": {"lineup-db-runtime", "lineup-service-tokens"},
        "lineup-relay": {"lineup-db-relay", "lineup-webhook"},
        "lineup-demo-agent": {"lineup-webhook", "lineup-service-tokens"},
    }
    for where, obj in workloads(rendered):
        (container,) = kube.containers(obj)
        assert secrets_of(container) == expected[obj["metadata"]["name"]], where
    assert [where for where, obj in every(rendered) if obj["kind"] == "Secret"] == []
    # The demo Agent takes two keys of the service's tokens, never the operator's.
    demo = named(rendered[("dev", "app")], "Deployment", "lineup-demo-agent")
    keys = {
        e["valueFrom"]["secretKeyRef"]["key"] for e in pod(demo)["containers"][0]["env"] if "valueFrom" in e
    }
    assert keys == {"AGENT_TOKEN", "HOST_TOKEN", "WEBHOOK_SECRET"}


def test_no_configmap_holds_a_secret(rendered: Rendered) -> None:
    secretish = re.compile(r"TOKEN|SECRET|PASSWORD|DATABASE_URL")
    for where, obj in every(rendered):
        if obj["kind"] == "ConfigMap":
            assert [key for key in obj["data"] if secretish.search(key)] == [], where


# -- images and resources --------------------------------------------------------------------------


def test_every_image_is_pinned_to_the_release_never_latest(rendered: Rendered) -> None:
    version = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M)
    assert version is not None
    for overlay in kube.OVERLAYS:
        images = {
            c["image"]
            for stage in kube.STAGES
            for obj in rendered[(overlay, stage)]
            if obj["kind"] in ("Deployment", "Job")
            for c in kube.containers(obj)
        }
        assert len(images) == 1, images  # the Jobs run the release the Deployments roll out
        (image,) = images
        name, _, tag = image.rpartition(":")
        assert name.endswith("lineup-runtime") and tag == version[1], image
    for where, obj in workloads(rendered):
        for container in kube.containers(obj):
            assert not container["image"].endswith(":latest"), where
            assert container["imagePullPolicy"] == "IfNotPresent", where


def test_every_container_has_requests_and_a_memory_limit(rendered: Rendered) -> None:
    for where, obj in workloads(rendered):
        for container in kube.containers(obj):
            resources = container["resources"]
            assert {"cpu", "memory"} <= set(resources["requests"]), where
            assert "memory" in resources["limits"], where


# -- probes and stopping ---------------------------------------------------------------------------


def port_number(container: Obj, port: int | str) -> int:
    if isinstance(port, int):
        return port
    return int(next(p["containerPort"] for p in container["ports"] if p["name"] == port))


def probes(container: Obj) -> dict[str, tuple[str, int]]:
    return {
        kind: (container[kind]["httpGet"]["path"], port_number(container, container[kind]["httpGet"]["port"]))
        for kind in ("startupProbe", "readinessProbe", "livenessProbe")
    }


def test_the_service_is_probed_on_its_http_port(rendered: Rendered) -> None:
    for overlay in kube.OVERLAYS:
        deployment = named(rendered[(overlay, "app")], "Deployment", "lineup-service")
        container = pod(deployment)["containers"][0]
        port = int(container["command"][container["command"].index("--port") + 1])
        assert probes(container) == {
            "startupProbe": ("/healthz", port),
            "readinessProbe": ("/readyz", port),
            "livenessProbe": ("/healthz", port),
        }


def test_the_relay_is_probed_on_its_relay_metrics_port_listening_beyond_localhost(rendered: Rendered) -> None:
    for overlay in kube.OVERLAYS:
        deployment = named(rendered[(overlay, "app")], "Deployment", "lineup-relay")
        container = pod(deployment)["containers"][0]
        env = env_of(container)
        assert env["RELAY_METRICS_HOST"] == "0.0.0.0"  # noqa: S104 - the probes come from outside the pod
        port = int(env["RELAY_METRICS_PORT"])
        assert probes(container) == {
            "startupProbe": ("/healthz", port),
            "readinessProbe": ("/readyz", port),
            "livenessProbe": ("/healthz", port),
        }


def test_liveness_gives_a_loop_failure_time_to_exit_on_its_own(rendered: Rendered) -> None:
    """A failed background loop turns /readyz 503 for LOOP_FAILURE_GRACE s, then the process exits:
    liveness never races that, and readiness takes the replica out within a few seconds."""
    from service.app import LOOP_FAILURE_GRACE

    for overlay in kube.OVERLAYS:
        container = pod(named(rendered[(overlay, "app")], "Deployment", "lineup-service"))["containers"][0]
        liveness = container["livenessProbe"]
        assert liveness["periodSeconds"] * liveness["failureThreshold"] > LOOP_FAILURE_GRACE
        readiness = container["readinessProbe"]
        assert readiness["periodSeconds"] * readiness["failureThreshold"] <= 15


def test_termination_grace_outlasts_each_process_drain(rendered: Rendered) -> None:
    serve = (ROOT / "service" / "cli" / "serve.py").read_text()
    drain = re.search(r"timeout_graceful_shutdown=(\d+)", serve)
    assert drain is not None
    relay_grace = Settings.model_fields["relay_shutdown_grace_seconds"].default
    for overlay in kube.OVERLAYS:
        objects = rendered[(overlay, "app")]
        service = pod(named(objects, "Deployment", "lineup-service"))
        pause = service["containers"][0]["lifecycle"]["preStop"]["exec"]["command"]
        assert pause[0] == "sleep"
        assert service["terminationGracePeriodSeconds"] >= int(pause[1]) + int(drain[1]) + 5
        relay = pod(named(objects, "Deployment", "lineup-relay"))
        assert relay["terminationGracePeriodSeconds"] >= relay_grace + 20


def test_rolling_updates_keep_every_old_replica_until_a_new_one_is_ready(rendered: Rendered) -> None:
    for overlay in kube.OVERLAYS:
        for name in ("lineup-service", "lineup-relay"):
            strategy = named(rendered[(overlay, "app")], "Deployment", name)["spec"]["strategy"]
            assert strategy["rollingUpdate"]["maxUnavailable"] == 0, (overlay, name)


# -- order: the schema Jobs first ------------------------------------------------------------------


def test_the_jobs_are_a_step_of_their_own_before_the_deployments(rendered: Rendered) -> None:
    """roles then migrate, in the schema stage (applied and waited for first); no Job in the app
    stage, no Deployment in the schema stage; the same order for Argo CD's hooks."""
    for overlay in kube.OVERLAYS:
        schema = rendered[(overlay, "schema")]
        jobs = sorted(
            (o for o in schema if o["kind"] == "Job"),
            key=lambda j: int(j["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"]),
        )
        assert [j["metadata"]["name"] for j in jobs] == ["lineup-roles", "lineup-migrate"]
        assert [o["kind"] for o in schema if o["kind"] in ("Deployment", "StatefulSet")] == []
        assert [o["kind"] for o in rendered[(overlay, "app")] if o["kind"] in ("Job", "CronJob")] == []
        waves = [int(j["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"]) for j in jobs]
        assert len(set(waves)) == 2 and max(waves) < 0  # roles, then migrate, before the app's wave 0
        assert {j["metadata"]["annotations"]["argocd.argoproj.io/hook"] for j in jobs} == {"PreSync"}
        commands = [pod(j)["containers"][0]["command"] for j in jobs]
        assert commands == [["python", "-m", "service", "roles"], ["python", "-m", "service", "migrate"]]
        roles_env = env_of(pod(jobs[0])["containers"][0])
        migrate_env = env_of(pod(jobs[1])["containers"][0])
        assert float(roles_env["ROLES_CONNECT_SECONDS"]) >= 60
        # migrate waits out roles' own wait for Postgres, then its making the owner role.
        assert float(migrate_env["MIGRATE_CONNECT_SECONDS"]) > float(roles_env["ROLES_CONNECT_SECONDS"])
        for job in jobs:
            spec = job["spec"]
            assert spec["backoffLimit"] >= 1 and spec["activeDeadlineSeconds"] > 0, job["metadata"]["name"]
            assert spec["ttlSecondsAfterFinished"] >= 3600 and pod(job)["restartPolicy"] == "Never"


def test_the_docs_apply_the_schema_step_and_wait_before_the_app() -> None:
    text = (ROOT / "docs" / "operations.md").read_text()
    section = text[text.index("## On Kubernetes") :]
    schema = section.index("kubectl apply -k deploy/kubernetes/overlays/production/schema")
    wait = section.index("wait --for=condition=complete")
    app = section.index("kubectl apply -k deploy/kubernetes/overlays/production\n")
    assert schema < wait < app


# -- availability ----------------------------------------------------------------------------------


def test_budgets_spread_and_the_autoscaler_cover_the_deployments(rendered: Rendered) -> None:
    for overlay in kube.OVERLAYS:
        objects = rendered[(overlay, "app")]
        for name in ("lineup-service", "lineup-relay"):
            deployment = named(objects, "Deployment", name)
            labels = deployment["spec"]["template"]["metadata"]["labels"]
            budget = named(objects, "PodDisruptionBudget", name)
            assert budget["spec"]["selector"]["matchLabels"].items() <= labels.items()
            assert budget["spec"]["maxUnavailable"] == 1
            keys = {c["topologyKey"] for c in pod(deployment)["topologySpreadConstraints"]}
            assert keys == {"kubernetes.io/hostname", "topology.kubernetes.io/zone"}
    production = rendered[("production", "app")]
    (hpa,) = [o for o in production if o["kind"] == "HorizontalPodAutoscaler"]
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "lineup-service",
    }
    assert hpa["spec"]["metrics"][0]["resource"]["name"] == "cpu"
    assert hpa["spec"]["minReplicas"] >= 2
    assert named(production, "Deployment", "lineup-relay")["spec"]["replicas"] == 2


def test_the_network_policies_let_in_only_the_service_port_and_out_only_what_each_needs(
    rendered: Rendered,
) -> None:
    for overlay in kube.OVERLAYS:
        objects = rendered[(overlay, "app")] + rendered[(overlay, "schema")]
        policies = {o["metadata"]["name"]: o["spec"] for o in objects if o["kind"] == "NetworkPolicy"}

        def ports(rules: list[Obj]) -> set[int]:
            return {p["port"] for rule in rules for p in rule.get("ports", [])}

        assert ports(policies["lineup-service"]["ingress"]) == {8000}
        assert ports(policies["lineup-service"]["egress"]) == {5432, 6432, 53}
        assert ports(policies["lineup-relay"]["ingress"]) == {9100}
        assert ports(policies["lineup-relay"]["egress"]) == {5432, 6432, 443, 53}
        assert policies["lineup-schema"]["ingress"] == []
        assert ports(policies["lineup-schema"]["egress"]) == {5432, 6432, 53}
        for spec in policies.values():
            assert "Egress" in spec["policyTypes"]
    dev = {o["metadata"]["name"] for o in rendered[("dev", "app")] if o["kind"] == "NetworkPolicy"}
    assert "lineup-relay-to-demo-agent" in dev


# -- monitoring ------------------------------------------------------------------------------------


def test_the_prometheus_rule_is_alerts_yml_as_it_is(rendered: Rendered) -> None:
    alerts = yaml.safe_load(kube.ALERTS.read_text())
    (rule,) = [o for o in rendered[("production", "app")] if o["kind"] == "PrometheusRule"]
    assert rule["spec"]["groups"] == alerts["groups"]
    assert kube.PROMETHEUS_RULE.read_text() == kube.prometheus_rule_text()  # `make kube-rules` was run


def test_the_service_monitors_give_the_jobs_the_alerts_select(rendered: Rendered) -> None:
    objects = rendered[("production", "app")]
    alerts = kube.ALERTS.read_text()
    jobs_in_alerts = set(re.findall(r'job="([^"]+)"', alerts))
    monitors = [o for o in objects if o["kind"] == "ServiceMonitor"]
    services = [o for o in objects if o["kind"] == "Service"]
    jobs = set()
    for monitor in monitors:
        selector = monitor["spec"]["selector"]["matchLabels"]
        (service,) = [s for s in services if selector.items() <= s["metadata"]["labels"].items()]
        jobs.add(service["metadata"]["labels"][monitor["spec"]["jobLabel"]])
        service_ports = {p["name"] for p in service["spec"]["ports"]}
        assert {e["port"] for e in monitor["spec"]["endpoints"]} <= service_ports
        assert all(e["path"] == "/metrics" for e in monitor["spec"]["endpoints"])
    assert jobs == jobs_in_alerts == {"lineup-service", "lineup-relay"}
    # LineupRelayDown needs a relay that is not ready to stay a target.
    assert named(objects, "Service", "lineup-relay")["spec"]["publishNotReadyAddresses"] is True
    service_monitor = next(m for m in monitors if m["metadata"]["name"] == "lineup-service")
    credentials = service_monitor["spec"]["endpoints"][0]["authorization"]["credentials"]
    assert credentials == {"name": "lineup-service-tokens", "key": "METRICS_TOKEN"}

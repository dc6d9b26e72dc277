"""The Kubernetes rig (``make kube``): the dev overlay of deploy/kubernetes/ played for real with
Podman (``podman kube play``) against a Postgres of its own.

```
.venv/bin/python -u -m rigs.kube [--rebuild] [--keep]
```

1. The image: ``podman build --format docker`` of the Dockerfile as it is, tagged as the overlay's
   image (``lineup-runtime:0.5.0``). Where no registry serves its base (``python:3.11-slim``) and the
   machine has none, a stand-in is made once from Debian's packages (``mmdebstrap``: Debian 12's
   Python 3.11, with this machine's CA bundle for pip) and tagged so.
2. A Postgres of its own (``initdb`` under a temp dir, a free port of 127.0.0.1), a database
   ``lineup``, and the Secrets the manifests name, made up here with the database's URLs.
3. The schema step as rendered (``kubectl kustomize overlays/dev/schema``): each Job's pod template
   played as a Pod (``podman kube play`` plays no Job), roles then migrate; each must exit 0.
4. The app as rendered (``kubectl kustomize overlays/dev``): its Deployments (the service, the
   relay, the demo Agent) and ConfigMap played with the Secrets; each must start, its containers as
   uid 10001 on a read-only root with no capabilities, and answer its probes.
5. A conversation: ``pomodoro.start`` then ``pomodoro.interrupt`` through the service with the
   Agent's token; the start's one result (``interrupted``) must reach the demo Agent, through the
   relay (the demo Agent's log line for it).

The pods share the host's network (Podman has no cluster DNS or Service addresses): the rig maps
each Service's name in a URL to 127.0.0.1, gives the processes free ports of this machine
instead of 8000, 8200 and 9100 (the same rewrite in their command, ports, probes and URLs), and
points the Secrets' URLs at its Postgres. What ``podman kube play`` cannot run is listed with the
reason. Exits 1 when a step fails, 2 when Podman is missing.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import copy
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import yaml

from harness import kube
from harness.calls import interrupt_body, start_body
from harness.postgres import own_postgres, wait_for
from harness.processes import free_port

ROOT = Path(__file__).resolve().parents[1]
PODMAN = ["podman", "--cgroup-manager=cgroupfs", "--runtime", "runc"]
#: Rootful Podman sets RLIMIT_NOFILE and RLIMIT_NPROC to its defaults (or this machine's) in each
#: container; a machine whose root lacks CAP_SYS_RESOURCE (a sandbox) refuses even its own values,
#: and takes lower ones: the rig's containers.conf gives those.
CONTAINERS_CONF = '[containers]\ndefault_ulimits = ["nofile=16384:16384", "nproc=4096:4096"]\n'

BASE_IMAGE = "docker.io/library/python:3.11-slim"
OVERLAY = "dev"
Obj = dict[str, Any]

#: What podman kube play (4.3) does not run, and why.
NOT_PLAYED = {
    "Service": "no cluster DNS or virtual IPs: the pods share the host's network, each Service's name"
    " in a URL becomes 127.0.0.1",
    "Job": "not a kind podman kube play runs: each Job's pod template is played as a Pod, and must exit 0",
    "PodDisruptionBudget": "no evictions or drains in Podman",
    "NetworkPolicy": "nothing in Podman enforces it (the host's network is shared)",
    "ServiceAccount": "no API server; the pods mount no token either way",
    "HorizontalPodAutoscaler": "no metrics server or scaler",
    "ServiceMonitor": "a Prometheus Operator object",
    "PrometheusRule": "a Prometheus Operator object",
}
#: Parts of a pod spec that podman kube play 4.3 ignores or runs differently, and why.
IGNORED = [
    "startupProbe, readinessProbe: ignored by podman kube play 4.3 (the rig asks their paths itself);"
    " livenessProbe becomes a Podman health check running curl, which the image has not, and which"
    " runs only with systemd timers (none here)",
    "lifecycle.preStop, terminationGracePeriodSeconds: ignored; podman stops with its own 10 s",
    "topologySpreadConstraints, replicas > 1: one machine, one pod per Deployment",
    "resources: the memory limit is applied, the CPU request is not",
    "emptyDir: played as a named volume (`tmp`), one for every pod, kept after `kube down` (the rig"
    " removes it)",
]


def podman(*args: str, check: bool = True, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    conf = Path(tempfile.gettempdir()) / "lineup-kube-containers.conf"
    if not conf.exists() or conf.read_text() != CONTAINERS_CONF:
        conf.write_text(CONTAINERS_CONF)
    result = subprocess.run(
        [*PODMAN, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=ROOT,
        env={**os.environ, "CONTAINERS_CONF": str(conf)},
    )
    if check and result.returncode != 0:
        raise RuntimeError(f"podman {' '.join(args)}: {result.stderr.strip() or result.stdout.strip()}")
    return result


def say(line: str) -> None:
    print(f"kube: {line}", flush=True)


# -- the image --------------------------------------------------------------------------------------


def ensure_base_image() -> str:
    if podman("image", "exists", BASE_IMAGE, check=False).returncode == 0:
        return "present"
    if podman("pull", BASE_IMAGE, check=False, timeout=300).returncode == 0:
        return "pulled"
    mmdebstrap = shutil.which("mmdebstrap")
    if mmdebstrap is None:
        raise RuntimeError(
            f"{BASE_IMAGE} cannot be pulled and mmdebstrap is missing (apt-get install mmdebstrap)"
        )
    with tempfile.TemporaryDirectory() as tmp:
        tar = Path(tmp) / "base.tar"
        subprocess.run(
            [
                mmdebstrap,
                "--variant=minbase",
                "--include=python3,python3-venv,python-is-python3,ca-certificates,passwd",
                "--customize-hook=cp /etc/ssl/certs/ca-certificates.crt"
                ' "$1"/etc/ssl/certs/host-ca-certificates.crt',
                "bookworm",
                str(tar),
            ],
            check=True,
            capture_output=True,
            timeout=1800,
        )
        podman(
            "import",
            "--change",
            "ENV PIP_CERT=/etc/ssl/certs/host-ca-certificates.crt",
            "--change",
            'CMD ["python3"]',
            str(tar),
            BASE_IMAGE,
        )
    return "made from Debian 12's packages (mmdebstrap): no registry serves it here"


def image_of(objects: list[Obj]) -> str:
    (image,) = {c["image"] for o in objects for c in kube.containers(o)}
    return str(image)


def ensure_image(image: str, *, rebuild: bool) -> str:
    if not rebuild and podman("image", "exists", image, check=False).returncode == 0:
        return "present (--rebuild builds it again)"
    base = ensure_base_image()
    started = time.monotonic()
    podman("build", "--format", "docker", "--network", "host", "--pull=never", "-t", image, ".", timeout=1800)
    return f"built in {time.monotonic() - started:.0f} s (base image {base})"


# -- the objects as Podman plays them ---------------------------------------------------------------


class Ports:
    """This machine's free ports standing for the ones the manifests name, and 127.0.0.1 for each
    Service's name (the host's network: Podman 4.3 ignores hostAliases there)."""

    def __init__(self, services: list[str], *names: int) -> None:
        self.services = services
        self.map = {port: free_port() for port in names}

    def text(self, value: str) -> str:
        for service in self.services:
            value = value.replace(f"//{service}:", "//127.0.0.1:")
        for port, free in self.map.items():
            value = value.replace(f":{port}", f":{free}")
        return value


def on_host_network(obj: Obj, ports: Ports) -> Obj:
    """``obj`` (a Deployment or a Pod) with the host's network: free ports, Services at 127.0.0.1."""
    obj = copy.deepcopy(obj)
    spec = obj["spec"]["template"]["spec"] if obj["kind"] != "Pod" else obj["spec"]
    spec["hostNetwork"] = True
    for container in kube.containers(obj):
        container["command"] = [
            str(ports.map.get(int(a), a)) if a.isdigit() else a for a in container["command"]
        ]
        named = {
            p["name"]: ports.map.get(p["containerPort"], p["containerPort"])
            for p in container.get("ports", [])
        }
        for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
            if kind in container and "httpGet" in container[kind]:
                port = container[kind]["httpGet"]["port"]
                container[kind]["httpGet"]["port"] = (
                    named[port] if isinstance(port, str) else ports.map.get(port, port)
                )
        # On the host's network a container port is no mapping: Podman refuses one there.
        container.pop("ports", None)
        for env in container.get("env", []):
            if "value" in env:
                value = env["value"]
                env["value"] = str(ports.map.get(int(value), value)) if value.isdigit() else ports.text(value)
    return obj


def config_on_host(obj: Obj, ports: Ports) -> Obj:
    obj = copy.deepcopy(obj)
    obj["data"] = {k: ports.text(v) for k, v in obj.get("data", {}).items()}
    return obj


def job_as_pod(job: Obj) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": job["metadata"]["name"],
            "labels": job["spec"]["template"]["metadata"]["labels"],
        },
        "spec": copy.deepcopy(job["spec"]["template"]["spec"]),
    }


def secret(name: str, values: dict[str, str]) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name},
        "type": "Opaque",
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in values.items()},
    }


def make_secrets(postgres_port: int) -> tuple[list[Obj], dict[str, str]]:
    def token() -> str:
        return secrets.token_urlsafe(32)

    passwords = {kind: token() for kind in ("owner", "runtime", "relay", "reader")}
    url = f"127.0.0.1:{postgres_port}/lineup"
    tokens = {
        "AGENT_TOKEN": token(),
        "HOST_TOKEN": token(),
        "OPERATOR_TOKEN": token(),
        "HOST_SESSION_SECRET": token(),
        "METRICS_TOKEN": token(),
    }
    webhook = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
    objects = [
        secret(
            "lineup-db-admin",
            {
                "DATABASE_URL": f"postgresql://postgres@{url}",
                **{f"DB_{kind.upper()}_PASSWORD": value for kind, value in passwords.items()},
            },
        ),
        secret("lineup-db-owner", {"DATABASE_URL": f"postgresql://lineup_owner:{passwords['owner']}@{url}"}),
        secret(
            "lineup-db-runtime", {"DATABASE_URL": f"postgresql://lineup_runtime:{passwords['runtime']}@{url}"}
        ),
        secret("lineup-db-relay", {"DATABASE_URL": f"postgresql://lineup_relay:{passwords['relay']}@{url}"}),
        secret("lineup-service-tokens", tokens),
        secret("lineup-webhook", {"WEBHOOK_SECRET": webhook}),
    ]
    return objects, tokens


def write(path: Path, objects: list[Obj]) -> Path:
    path.write_text(yaml.safe_dump_all(objects, sort_keys=False))
    return path


# -- running ----------------------------------------------------------------------------------------


def pod_info(pod: str) -> Obj:
    data = json.loads(podman("pod", "inspect", pod).stdout)
    info: Obj = data[0] if isinstance(data, list) else data
    return info


def containers_of(pod: str) -> list[str]:
    data = pod_info(pod)
    return [c["Name"] for c in data.get("Containers", []) if not c["Name"].endswith("-infra")]


def inspect(container: str) -> Obj:
    data: Obj = json.loads(podman("container", "inspect", container).stdout)[0]
    return data


HARDENED = "uid 10001, read-only root, no capabilities, no new privileges"


def hardening(container: str) -> str:
    """What Podman made of the pod's security settings, and whether it is what the manifests say."""
    data = inspect(container)
    host = data["HostConfig"]
    user = data["Config"].get("User", "")
    read_only = host.get("ReadonlyRootfs", False)
    caps = data.get("EffectiveCaps") or []
    checks = {
        "uid 10001": user.split(":")[0] == "10001",
        "read-only root": bool(read_only),
        "no capabilities": caps in ([], None),
        "no new privileges": "no-new-privileges" in " ".join(host.get("SecurityOpt") or []),
    }
    failed = [name for name, ok in checks.items() if not ok]
    if failed:
        raise RuntimeError(
            f"{container}: not {', '.join(failed)} (user {user!r}, caps {caps}, {host.get('SecurityOpt')})"
        )
    return ", ".join(checks)


def logs(container: str) -> str:
    result = podman("logs", container, check=False)
    return result.stdout + result.stderr


def play(file: Path) -> list[str]:
    """The pods ``podman kube play`` made of ``file`` (by name)."""
    out = podman("kube", "play", "--network", "host", str(file), timeout=600).stdout
    lines = [line.strip() for line in out.splitlines()]
    ids = [lines[i + 1] for i, line in enumerate(lines[:-1]) if line == "Pod:"]
    return [str(pod_info(pod)["Name"]) for pod in ids]


def run_job(pod_file: Path, name: str, timeout: float = 300) -> float:
    started = time.monotonic()
    play(pod_file)
    container = f"{name}-{job_container(pod_file)}"
    code = podman("wait", container, timeout=timeout).stdout.strip()
    text = logs(container)
    for line in text.strip().splitlines()[-4:]:
        say(f"  {name}| {line}")
    if code != "0":
        raise RuntimeError(f"Job {name} exited {code}:\n{text[-3000:]}")
    hardening(container)
    return time.monotonic() - started


def job_container(pod_file: Path) -> str:
    pod = next(o for o in yaml.safe_load_all(pod_file.read_text()) if o and o["kind"] == "Pod")
    return str(pod["spec"]["containers"][0]["name"])


def wait_http(url: str, *, timeout: float = 120, headers: dict[str, str] | None = None) -> float:
    started = time.monotonic()

    def answered() -> bool | None:
        try:
            return httpx.get(url, timeout=3, headers=headers).status_code == 200 or None
        except httpx.HTTPError:
            return None

    wait_for(url, answered, timeout, interval=0.5)
    return time.monotonic() - started


@contextlib.contextmanager
def cleanup(files: list[Path], keep: bool) -> Iterator[None]:
    volume_existed = podman("volume", "exists", "tmp", check=False).returncode == 0
    try:
        yield
    finally:
        if not keep:
            for file in reversed(files):
                if file.exists():
                    podman("kube", "down", str(file), check=False, timeout=120)
            for name in ("lineup-roles", "lineup-migrate"):
                podman("pod", "rm", "-f", name, check=False)
            if not volume_existed:
                podman("volume", "rm", "tmp", check=False)
            for name in (
                "lineup-db-admin",
                "lineup-db-owner",
                "lineup-db-runtime",
                "lineup-db-relay",
                "lineup-service-tokens",
                "lineup-webhook",
            ):
                podman("secret", "rm", name, check=False)


def trial(args: argparse.Namespace) -> int:
    started = time.monotonic()
    version = podman("--version").stdout.strip()
    say(f"{version}; kubectl {kube.find_kubectl()}")
    schema = kube.render(kube.overlay_path(OVERLAY, "schema"))
    app = kube.render(kube.overlay_path(OVERLAY, "app"))
    image = image_of(schema + app)
    say(f"rendered overlays/{OVERLAY}/schema ({len(schema)} objects), overlays/{OVERLAY} ({len(app)})")
    say(f"image {image}: {ensure_image(image, rebuild=args.rebuild)}")
    size = podman("image", "inspect", image, "--format", "{{.Size}} {{.Config.User}}").stdout.split()
    say(f"image {image}: {int(size[0]) / 1e6:.0f} MB, user {size[1]}")

    services = sorted(o["metadata"]["name"] for o in app if o["kind"] == "Service")
    ports = Ports(services, 8000, 8200, 9100)
    with (
        own_postgres(prefix="lineup-kube-") as postgres,
        tempfile.TemporaryDirectory(prefix="lineup-kube-") as tmp,
    ):
        work = Path(tmp)
        with psycopg.connect(postgres.admin_url, autocommit=True) as conn:
            conn.execute("CREATE DATABASE lineup")
        say(f"postgres on 127.0.0.1:{postgres.port} (trust auth; the roles' passwords are set all the same)")
        secret_objects, tokens = make_secrets(postgres.port)
        files: list[Path] = []
        with cleanup(files, args.keep):
            # Podman 4.3 reads a secretRef's podman secret as a JSON mapping of each key to its
            # base64 value (a Secret played in YAML is stored as that YAML, which it cannot read).
            for obj in secret_objects:
                source = work / f"{obj['metadata']['name']}.json"
                source.write_text(json.dumps(obj["data"]))
                podman("secret", "create", obj["metadata"]["name"], str(source))
                source.unlink()
            say(f"secrets: {', '.join(o['metadata']['name'] for o in secret_objects)} (podman secrets)")

            # The schema step: roles, then migrate (their sync waves).
            jobs = sorted(
                (o for o in schema if o["kind"] == "Job"),
                key=lambda j: int(j["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"]),
            )
            for job in jobs:
                name = job["metadata"]["name"]
                pod_file = write(work / f"{name}.yaml", [on_host_network(job_as_pod(job), ports)])
                files.append(pod_file)
                took = run_job(pod_file, name)
                say(f"Job {name}: exit 0 in {took:.1f} s ({HARDENED})")

            # The app: its Deployments and ConfigMap, as rendered, on the host's network.
            played = [
                on_host_network(o, ports) if o["kind"] == "Deployment" else config_on_host(o, ports)
                for o in app
                if o["kind"] in ("Deployment", "ConfigMap")
            ]
            app_file = write(work / "app.yaml", played)
            files.append(app_file)
            pods = play(app_file)
            say(f"played: {', '.join(pods)}")
            service_url = f"http://127.0.0.1:{ports.map[8000]}"
            relay_url = f"http://127.0.0.1:{ports.map[9100]}"
            agent_url = f"http://127.0.0.1:{ports.map[8200]}"
            for what, url in (
                ("service /healthz", f"{service_url}/healthz"),
                ("service /readyz", f"{service_url}/readyz"),
                ("relay /healthz", f"{relay_url}/healthz"),
                ("relay /readyz", f"{relay_url}/readyz"),
                ("demo Agent /healthz", f"{agent_url}/healthz"),
            ):
                say(f"{what}: 200 after {wait_http(url):.1f} s")
            checked = []
            for pod in pods:
                for container in containers_of(pod):
                    hardening(container)
                    checked.append(container)
            say(f"containers {', '.join(checked)}: {HARDENED}")

            # A start and an interrupt; the start's result must reach the demo Agent.
            conversation = f"kube-{uuid.uuid4().hex[:8]}"
            headers = {"Authorization": f"Bearer {tokens['AGENT_TOKEN']}"}
            begin = start_body(conversation)
            start = httpx.post(f"{service_url}/v1/tool-calls", json=begin, headers=headers, timeout=10)
            say(f"pomodoro.start: {start.status_code}")
            interrupt = interrupt_body(conversation)
            answer = httpx.post(f"{service_url}/v1/tool-calls", json=interrupt, headers=headers, timeout=10)
            say(f"pomodoro.interrupt: {answer.status_code}")
            if start.status_code >= 300 or answer.status_code >= 300:
                raise RuntimeError(f"calls refused: {start.text} / {answer.text}")
            agent = next(c for pod in pods for c in containers_of(pod) if "demo-agent" in c)

            def delivered() -> str | None:
                return next(
                    (
                        line
                        for line in logs(agent).splitlines()
                        if begin["tool_call_id"] in line and '"interrupted"' in line
                    ),
                    None,
                )

            # The start's one result (202: it comes later), now that it was interrupted.
            line = wait_for("the start's result at the demo Agent", delivered, 60, interval=0.5)
            say(f"delivered to the demo Agent: {line.strip()[:200]}")

            kinds = sorted({o["kind"] for o in schema + app})
            say("not played by podman kube play:")
            for kind in kinds:
                if kind in NOT_PLAYED:
                    count = sum(1 for o in schema + app if o["kind"] == kind)
                    say(f"  {kind} ({count}): {NOT_PLAYED[kind]}")
            for part in IGNORED:
                say(f"  {part}")
    say(f"passed in {time.monotonic() - started:.0f} s")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rebuild", action="store_true", help="build the image even when it exists")
    parser.add_argument("--keep", action="store_true", help="leave the pods and secrets (for a look)")
    args = parser.parse_args(argv)
    if shutil.which("podman") is None:
        say("skipped: podman is not installed (make kube installs Debian's)")
        return 2
    try:
        return trial(args)
    except (RuntimeError, TimeoutError, subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        say(f"FAILED: {exc}")
        return 1


if __name__ == "__main__":
    sys.exit(main())

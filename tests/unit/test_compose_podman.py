"""docker-compose.yml as the podman-compose versions read it: what each version understands, and
that docs/operations.md names the version the file needs and what breaks below it.

The readers below follow podman-compose's own code for ``env_file`` (1.0.3, Debian 12's: every
entry joined to the file's directory as a path; 1.2.0 on: a mapping's ``path`` and ``required``)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
OPERATIONS = (ROOT / "docs" / "operations.md").read_text()


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return loaded


def env_files_as_1_0(service: dict[str, Any], dirname: str) -> list[str]:
    """podman-compose 1.0.3 to 1.1.0, ``container_to_args``: a string or a list of paths."""
    env_file = service.get("env_file", [])
    if isinstance(env_file, str):
        env_file = [env_file]
    return [os.path.realpath(os.path.join(dirname, entry)) for entry in env_file]


def env_files_as_1_2(service: dict[str, Any], dirname: str) -> list[tuple[str, bool]]:
    """podman-compose 1.2.0 on: a string, a mapping, or a list of either; (path, required)."""
    env_file = service.get("env_file", [])
    if isinstance(env_file, (str, dict)):
        env_file = [env_file]
    read = []
    for entry in env_file:
        path, required = (
            (entry, True) if isinstance(entry, str) else (entry["path"], entry.get("required", True))
        )
        read.append((os.path.realpath(os.path.join(dirname, path)), bool(required)))
    return read


def needs(version: str, feature: str) -> None:
    """docs/operations.md's version table has a row for ``version`` naming ``feature``."""
    row = next((line for line in OPERATIONS.splitlines() if line.startswith(f"| {version} |")), None)
    assert row is not None, f"docs/operations.md names no podman-compose {version} row"
    assert feature in row, row


def test_every_app_service_reads_the_example_then_an_optional_env_file_from_1_2(
    compose: dict[str, Any],
) -> None:
    dirname = str(ROOT)
    with_env = {name: s for name, s in compose["services"].items() if "env_file" in s}
    assert with_env
    for name, service in with_env.items():
        assert env_files_as_1_2(service, dirname) == [
            (str(ROOT / ".env.example"), True),
            (str(ROOT / ".env"), False),
        ], name


def test_podman_compose_1_0_cannot_read_the_env_files_and_the_docs_name_1_2(compose: dict[str, Any]) -> None:
    """Debian 12's podman-compose 1.0.3 crashes on the long form: the docs must say 1.2.0 and why.
    Should the file go back to plain paths, this fails: the version table must then change too."""
    service = compose["services"]["service"]
    with pytest.raises(TypeError, match="join\\(\\) argument must be str"):
        env_files_as_1_0(service, str(ROOT))
    needs("1.2.0", "`env_file`")
    assert "TypeError: join() argument must be str, bytes, or os.PathLike object, not 'dict'" in OPERATIONS


def test_the_docs_name_the_version_of_every_feature_the_file_uses(compose: dict[str, Any]) -> None:
    services = compose["services"]
    if any("profiles" in s for s in services.values()):
        needs("1.1.0", "`profiles`")
    conditions = {
        dep.get("condition")
        for s in services.values()
        if isinstance(s.get("depends_on"), dict)
        for dep in s["depends_on"].values()
    }
    if conditions - {None, "service_started"}:
        needs("1.3.0", "`depends_on` conditions")


def test_without_health_gating_every_first_step_waits_for_postgres_itself(compose: dict[str, Any]) -> None:
    """podman-compose before 1.3.0 (and Podman without systemd) ignores ``condition:``: each
    one-shot that connects first waits for Postgres on its own, a bounded time."""
    waits = {"roles": "ROLES_CONNECT_SECONDS", "migrate": "MIGRATE_CONNECT_SECONDS"}
    for name, service in compose["services"].items():
        command = service.get("command") or []
        step = next((word for word in ("roles", "migrate") if command[-1:] == [word]), None)
        if step is None:
            continue
        seconds = service["environment"].get(waits[step])
        assert seconds is not None and float(seconds) >= 60, f"{name}: no {waits[step]}"
        assert re.search(rf"`{waits[step]}`", OPERATIONS), waits[step]

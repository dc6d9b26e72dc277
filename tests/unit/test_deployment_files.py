"""docker-compose.yml, the Dockerfile and the example env file: valid, and pointing at real commands."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft7Validator, validators

ROOT = Path(__file__).resolve().parents[2]
# The Compose Specification's schema as the check-jsonschema package ships it (the test extra):
# a versioned copy from a package, never fetched at test time, never read from outside the repository.
COMPOSE_SCHEMA = resources.files("check_jsonschema.builtin_schemas.vendor") / "compose-spec.json"


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return loaded


def compose_errors(document: dict[str, Any]) -> list[str]:
    schema = json.loads(COMPOSE_SCHEMA.read_text())
    validator_class = validators.validator_for(schema, default=Draft7Validator)
    validator_class.check_schema(schema)
    errors = sorted(validator_class(schema).iter_errors(document), key=lambda e: list(e.path))
    return [f"{list(e.path)}: {e.message}" for e in errors]


def test_compose_file_satisfies_the_compose_specification(compose: dict[str, Any]) -> None:
    assert compose_errors(compose) == []


def test_the_compose_specification_check_refuses_a_file_that_breaks_it(compose: dict[str, Any]) -> None:
    relay = {**compose["services"]["relay"], "restart_when": "always"}  # not a Compose attribute
    broken = {**compose, "services": {**compose["services"], "relay": relay}}
    assert compose_errors(broken) != []


def test_no_file_of_the_repository_reaches_outside_it() -> None:
    """The repository stands alone: no code, test, doc or setting names a path beside it."""
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=False, timeout=60
    ).stdout.split(b"\0")
    if not any(tracked):
        pytest.skip("not a git checkout")
    # Spelled in parts so that this file does not name them itself.
    outside = [("../" + "shared").encode(), ("/work/" + "shared").encode()]
    offenders = [
        name.decode()
        for name in tracked
        if name
        and (ROOT / name.decode()).is_file()
        and any(path in (ROOT / name.decode()).read_bytes() for path in outside)
    ]
    assert offenders == []


def test_compose_runs_postgres_migrate_service_two_relays_and_a_demo_agent_profile(
    compose: dict[str, Any],
) -> None:
    services = compose["services"]
    assert services["postgres"]["image"].startswith("postgres:16")
    assert "healthcheck" in services["postgres"]
    assert any(v.startswith("pgdata:") for v in services["postgres"]["volumes"])
    assert services["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert services["service"]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    assert services["relay"]["deploy"]["replicas"] == 2
    assert services["demo-agent"]["profiles"] == ["demo"]


def test_the_relay_health_check_asks_the_probe_port_the_relay_is_given(compose: dict[str, Any]) -> None:
    relay = compose["services"]["relay"]
    port = relay["environment"]["RELAY_METRICS_PORT"]
    assert f"http://127.0.0.1:{port}/healthz" in " ".join(relay["healthcheck"]["test"])


@pytest.mark.parametrize("name", ["migrate", "service", "relay", "demo-agent"])
def test_every_compose_command_is_a_real_command(compose: dict[str, Any], name: str) -> None:
    command = compose["services"][name]["command"]
    assert command[:2] == ["python", "-m"]
    result = subprocess.run(
        [sys.executable, *command[1:], "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr


def test_every_variable_of_the_example_env_file_is_a_setting_or_for_postgres() -> None:
    from service.settings import Settings

    names = {
        line.split("=", 1)[0]
        for line in (ROOT / ".env.example").read_text().splitlines()
        if line and not line.startswith("#")
    }
    settings_names = {name.upper() for name in Settings.model_fields}
    assert names - settings_names == {"POSTGRES_PASSWORD"}


def test_compose_publishes_the_service_on_this_machine_only_by_default(compose: dict[str, Any]) -> None:
    published = compose["services"]["service"]["ports"]
    assert published == ["${LINEUP_PUBLISH:-127.0.0.1:8000}:8000"]
    for name, service in compose["services"].items():
        for port in service.get("ports", []):
            assert "127.0.0.1:" in port, (name, port)


def test_image_runs_as_a_non_root_user_from_a_multi_stage_build() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert dockerfile.count("FROM ") >= 2
    user_lines = [line for line in dockerfile.splitlines() if line.startswith("USER ")]
    assert user_lines
    assert user_lines[-1].split()[1] not in ("root", "0")

"""docker-compose.yml, the Dockerfile and the example env file: valid, and pointing at real commands."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft7Validator, validators

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT.parent / "shared" / "data" / "compose-spec.schema.json"


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return loaded


def test_compose_file_satisfies_the_compose_specification(compose: dict[str, Any]) -> None:
    if not SCHEMA.exists():
        pytest.fail(f"the Compose Specification schema is missing at {SCHEMA}")
    schema = json.loads(SCHEMA.read_text())
    validator_class = validators.validator_for(schema, default=Draft7Validator)
    validator_class.check_schema(schema)
    errors = sorted(validator_class(schema).iter_errors(compose), key=lambda e: list(e.path))
    assert [f"{list(e.path)}: {e.message}" for e in errors] == []


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


def test_image_runs_as_a_non_root_user_from_a_multi_stage_build() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert dockerfile.count("FROM ") >= 2
    user_lines = [line for line in dockerfile.splitlines() if line.startswith("USER ")]
    assert user_lines
    assert user_lines[-1].split()[1] not in ("root", "0")

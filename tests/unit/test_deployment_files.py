"""docker-compose.yml, the Dockerfile and the example env file: valid, and pointing at real commands."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from jsonschema import Draft7Validator, validators

from service.settings import SettingsError

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
    """The repository stands alone: no code, test, doc or setting names a path beside it. One
    exception: CI's script may hand a vendored source tarball (beside the checkout on the CI
    machine) to an optional rig, and nothing else."""
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=False, timeout=60
    ).stdout.split(b"\0")
    if not any(tracked):
        pytest.skip("not a git checkout")
    # Spelled in parts so that this file does not name them itself.
    outside = [("../" + "shared").encode(), ("/work/" + "shared").encode()]
    vendored = ("../" + "shared/vendor/").encode()

    def reaches_outside(name: str) -> bool:
        text = (ROOT / name).read_bytes()
        if name == ".ci/run":
            text = text.replace(vendored, b"")
        return any(path in text for path in outside)

    offenders = [
        name.decode()
        for name in tracked
        if name and (ROOT / name.decode()).is_file() and reaches_outside(name.decode())
    ]
    assert offenders == []


def test_compose_runs_postgres_roles_migrate_service_two_relays_and_a_demo_agent_profile(
    compose: dict[str, Any],
) -> None:
    services = compose["services"]
    assert services["postgres"]["image"].startswith("postgres:16")
    assert "healthcheck" in services["postgres"]
    assert any(v.startswith("pgdata:") for v in services["postgres"]["volumes"])
    assert services["roles"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert services["migrate"]["depends_on"]["roles"]["condition"] == "service_completed_successfully"
    assert services["service"]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    assert services["relay"]["deploy"]["replicas"] == 2
    assert services["demo-agent"]["profiles"] == ["demo"]


def test_the_citus_profile_runs_a_coordinator_two_workers_and_a_relay_on_each(
    compose: dict[str, Any],
) -> None:
    services = compose["services"]
    citus = {name for name, service in services.items() if service.get("profiles") == ["citus"]}
    nodes = {"citus-coordinator", "citus-worker-1", "citus-worker-2"}
    one_shots = {"citus-roles", "citus-migrate", "citus-distribute"}
    assert citus == nodes | one_shots | {"citus-service", "citus-relay-1", "citus-relay-2"}
    assert all(services[node]["image"].endswith("citusdata/citus:13.0.3}") for node in nodes)
    distribute = services["citus-distribute"]
    assert distribute["command"][:4] == ["python", "-m", "service", "distribute"]
    assert distribute["depends_on"]["citus-migrate"]["condition"] == "service_completed_successfully"
    coordinator = "@citus-coordinator:5432/"
    assert coordinator in services["citus-service"]["environment"]["DATABASE_URL"]
    for n in (1, 2):
        relay = services[f"citus-relay-{n}"]["environment"]
        assert f"@citus-worker-{n}:5432/" in relay["DATABASE_URL"]  # the shards of its worker
        assert coordinator in relay["LISTEN_DATABASE_URL"]  # the service's wake-ups


def test_the_relay_health_check_asks_the_probe_port_the_relay_is_given(compose: dict[str, Any]) -> None:
    relay = compose["services"]["relay"]
    port = relay["environment"]["RELAY_METRICS_PORT"]
    assert f"http://127.0.0.1:{port}/healthz" in " ".join(relay["healthcheck"]["test"])


@pytest.mark.parametrize(
    "name",
    [
        "roles",
        "migrate",
        "service",
        "relay",
        "demo-agent",
        "citus-migrate",
        "citus-distribute",
        "citus-relay-1",
    ],
)
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


def test_every_password_of_the_example_env_file_is_a_placeholder_the_settings_refuse() -> None:
    from service.settings import load_settings

    values = dict(
        line.split("=", 1)
        for line in (ROOT / ".env.example").read_text().splitlines()
        if line and not line.startswith("#")
    )
    passwords = {name: value for name, value in values.items() if name.endswith("_PASSWORD")}
    assert set(passwords) == {
        "POSTGRES_PASSWORD",
        "DB_OWNER_PASSWORD",
        "DB_RUNTIME_PASSWORD",
        "DB_RELAY_PASSWORD",
        "DB_READER_PASSWORD",
    }
    assert len(set(passwords.values())) == len(passwords)  # one per role, never shared
    roles_settings = {name.lower(): value for name, value in passwords.items() if name.startswith("DB_")}
    with pytest.raises(SettingsError, match=r"DB_OWNER_PASSWORD.*DB_READER_PASSWORD"):
        load_settings("roles", database_url="postgresql://admin:Xk29fjqL0pZ7wq@db/lineup", **roles_settings)
    for value in passwords.values():
        url = f"postgresql://someone:{value}@postgres:5432/lineup"
        with pytest.raises(SettingsError, match="DATABASE_URL"):
            load_settings("migrate", database_url=url)


# -- the compose file as it runs: health checks and database roles ---------------------------------

APP_IMAGE = "lineup-runtime:latest"


def _dockerfile_healthcheck() -> str:
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    (line,) = [line for line in text.splitlines() if line.startswith("HEALTHCHECK")]
    return line


def _listens_on(service: dict[str, Any]) -> int | None:
    """The port a service's command listens on (--port N), or its probe port (RELAY_METRICS_PORT)."""
    command = service.get("command", [])
    if "--port" in command:
        return int(command[command.index("--port") + 1])
    port = service.get("environment", {}).get("RELAY_METRICS_PORT")
    return int(port) if port else None


def _healthcheck(service: dict[str, Any]) -> str | None:
    """What the container's health check runs: its own, the image's, or None when disabled/absent."""
    check = service.get("healthcheck")
    if check is not None:
        return None if check.get("disable") else " ".join(check["test"])
    return _dockerfile_healthcheck() if service.get("image") == APP_IMAGE else None


def test_every_health_check_asks_the_port_its_service_listens_on(compose: dict[str, Any]) -> None:
    checked = []
    for name, service in compose["services"].items():
        check = _healthcheck(service)
        if check is None or service.get("image") != APP_IMAGE:
            continue
        port = _listens_on(service)
        assert port is not None, f"{name} has a health check but listens on no port"
        assert re.findall(r"127\.0\.0\.1:(\d+)", check) == [str(port)], (name, check)
        checked.append(name)
    assert sorted(checked) == [
        "citus-relay-1",
        "citus-relay-2",
        "citus-service",
        "demo-agent",
        "relay",
        "service",
    ]


def test_the_one_shots_have_no_health_check(compose: dict[str, Any]) -> None:
    for name in ("roles", "migrate", "citus-roles", "citus-migrate", "citus-distribute"):
        assert compose["services"][name]["restart"] == "no"
        assert compose["services"][name]["healthcheck"] == {"disable": True}
        assert _healthcheck(compose["services"][name]) is None


def test_the_health_check_test_finds_a_wrong_port(compose: dict[str, Any]) -> None:
    agent = {**compose["services"]["demo-agent"]}
    agent.pop("healthcheck")  # the image's check on :8000, as before
    assert re.findall(r"127\.0\.0\.1:(\d+)", _healthcheck(agent) or "") != [str(_listens_on(agent))]


def _database_user(service: dict[str, Any]) -> str | None:
    url = service.get("environment", {}).get("DATABASE_URL")
    return urlsplit(url).username if url else None


def test_no_service_but_the_roles_one_shot_connects_as_the_superuser(compose: dict[str, Any]) -> None:
    from service.settings import Settings

    services = compose["services"]
    superuser = services["postgres"]["environment"]["POSTGRES_USER"]
    users = {name: _database_user(service) for name, service in services.items()}
    # The Citus profile's roles, and its distribute, which names the nodes to each other.
    assert {name for name, user in users.items() if user == superuser} == {
        "roles",
        "citus-roles",
        "citus-distribute",
    }
    assert services["roles"]["command"] == ["python", "-m", "service", "roles"]
    defaults = {
        name: Settings.model_fields[f"db_{name}_role"].default for name in ("owner", "runtime", "relay")
    }
    assert users["migrate"] == defaults["owner"]
    assert users["service"] == defaults["runtime"]
    assert users["relay"] == defaults["relay"]
    for line in (ROOT / ".env.example").read_text().splitlines():
        assert not line.startswith("DATABASE_URL="), "every process has its own URL in the compose file"


def test_only_the_roles_one_shot_knows_the_admin_passwords(compose: dict[str, Any]) -> None:
    for name, service in compose["services"].items():
        if service.get("image") != APP_IMAGE or name in ("roles", "citus-roles", "citus-distribute"):
            continue
        environment = service["environment"]
        for secret in ("POSTGRES_PASSWORD", "DB_OWNER_PASSWORD", "DB_RUNTIME_PASSWORD", "DB_RELAY_PASSWORD"):
            assert environment[secret] == "", (name, secret)


def test_env_files_stay_out_of_git_and_of_the_build_context() -> None:
    for ignore in (".gitignore", ".dockerignore"):
        lines = (ROOT / ignore).read_text().splitlines()
        assert ".env" in lines and "!.env.example" in lines, ignore


def test_the_readme_says_how_to_build_with_podman() -> None:
    assert "podman build --format docker" in (ROOT / "README.md").read_text()


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

"""A missing or invalid variable stops the process at start with a message naming it."""

from __future__ import annotations

import base64
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from service.__main__ import main
from service.settings import SettingsError, load_settings
from tests.conftest import ROOT
from tests.support.manifests import SHIPPED

AGENT, HOST, OPERATOR = "agent-7Fq2xLp9Wz", "host-Kd83mPq0Zt5", "operator-Yx4Nc2Rv"
GOOD = {
    "DATABASE_URL": "postgresql://u@localhost/db",
    "AGENT_TOKEN": AGENT,
    "HOST_TOKEN": HOST,
    "OPERATOR_TOKEN": OPERATOR,
}
SESSION_SECRET = "session-secret-Q1w2E3r4T5y6U7i8O9p0"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        *GOOD,
        "AGENT_WEBHOOK_URL",
        "WEBHOOK_SECRET",
        "RELAY_MAX_ATTEMPTS",
        "MANIFESTS_DIR",
        "HOST_SESSION_SECRET",
        "MCP_APP_SECRET",
        "LINEUP_DEV_STACK",
    ):
        monkeypatch.delenv(name, raising=False)


def set_env(monkeypatch: pytest.MonkeyPatch, **values: str) -> None:
    for name, value in values.items():
        monkeypatch.setenv(name, value)


def test_serve_settings_load_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    set_env(monkeypatch, **GOOD)
    settings = load_settings("serve")
    assert settings.tokens("agent") == (AGENT,)
    assert settings.interrupt_late_window_seconds == 300


@pytest.mark.parametrize("missing", ["DATABASE_URL", "AGENT_TOKEN", "HOST_TOKEN", "OPERATOR_TOKEN"])
def test_a_missing_variable_is_named(monkeypatch: pytest.MonkeyPatch, missing: str) -> None:
    set_env(monkeypatch, **{k: v for k, v in GOOD.items() if k != missing})
    with pytest.raises(SettingsError, match=missing):
        load_settings("serve")


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("DATABASE_URL", "mysql://x"),
        ("RELAY_MAX_ATTEMPTS", "zero"),
        ("RELAY_MAX_ATTEMPTS", "0"),
        ("AGENT_TOKEN", "short"),
        ("MANIFESTS_DIR", "/no/such/dir"),
        ("INTERRUPT_LATE_WINDOW_SECONDS", "-1"),
    ],
)
def test_an_invalid_variable_is_named(monkeypatch: pytest.MonkeyPatch, name: str, value: str) -> None:
    set_env(monkeypatch, **GOOD)
    monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError, match=name):
        load_settings("serve")


def test_several_tokens_per_audience_allow_rotation(monkeypatch: pytest.MonkeyPatch) -> None:
    set_env(monkeypatch, **GOOD)
    monkeypatch.setenv("AGENT_TOKEN", f"{AGENT} {AGENT}-next")
    assert load_settings("serve").tokens("agent") == (AGENT, f"{AGENT}-next")


def test_serve_exits_2_naming_the_missing_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    set_env(monkeypatch, **{k: v for k, v in GOOD.items() if k != "HOST_TOKEN"})
    assert main(["serve", "--port", "1"]) == 2
    assert "HOST_TOKEN" in capsys.readouterr().err


def test_serve_exits_2_naming_a_bad_manifest(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "interact").mkdir()
    (tmp_path / "interact" / "manifest.json").write_text('{"manifest_version": 1, "app_scope": "interact"}')
    set_env(monkeypatch, **GOOD, MANIFESTS_DIR=str(tmp_path))
    assert main(["serve", "--port", "1"]) == 2
    err = capsys.readouterr().err
    assert "interact/manifest.json" in err and "$" in err


def test_serve_exits_2_naming_an_otel_exporter_it_cannot_run_or_a_trace_link_without_the_id(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    set_env(monkeypatch, **GOOD, OTEL_TRACES_EXPORTER="zipkin")
    assert main(["serve", "--port", "1"]) == 2
    assert "OTEL_TRACES_EXPORTER names 'zipkin'" in capsys.readouterr().err
    set_env(monkeypatch, **GOOD, TRACE_URL_TEMPLATE="http://jaeger:16686/trace/")
    assert main(["serve", "--port", "1"]) == 2
    err = capsys.readouterr().err
    assert "TRACE_URL_TEMPLATE" in err and "{trace_id}" in err


def test_serve_exits_2_when_a_registration_and_its_sql_disagree(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    shutil.copytree(SHIPPED / "interact", tmp_path / "interact")
    sql = tmp_path / "interact" / "decisions.sql"
    sql.write_text(sql.read_text().replace("outcome := 'too_many_requests';", "outcome := 'too_many';"))
    set_env(monkeypatch, **GOOD, MANIFESTS_DIR=str(tmp_path))
    assert main(["serve", "--port", "1"]) == 2
    assert "interact_ask() can answer 'too_many', which its registration" in capsys.readouterr().err


def test_serve_exits_2_when_a_workspace_app_has_no_page_in_its_folder(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    shutil.copytree(SHIPPED / "interact", tmp_path / "interact")
    shutil.copytree(SHIPPED / "whiteboard", tmp_path / "whiteboard")
    (tmp_path / "whiteboard" / "surface" / "index.html").unlink()
    set_env(monkeypatch, **GOOD, MANIFESTS_DIR=str(tmp_path))
    assert main(["serve", "--port", "1"]) == 2
    assert "whiteboard/manifest.json: $.surface: a workspace app's page surface/index.html" in (
        capsys.readouterr().err
    )


def test_token_check_compares_against_every_token_in_constant_time(monkeypatch: pytest.MonkeyPatch) -> None:
    import hmac

    from service import http as auth

    calls: list[tuple[bytes, bytes]] = []
    original = hmac.compare_digest

    def counting(a: bytes, b: bytes) -> bool:
        calls.append((a, b))
        return original(a, b)

    monkeypatch.setattr(hmac, "compare_digest", counting)
    book = auth.TokenBook({"agent": ["a" * 20, "b" * 20, "c" * 20]})
    for presented, expected in (("a" * 20, True), ("c" * 20, True), ("z" * 20, False), ("short", False)):
        calls.clear()
        assert book.accepts("agent", presented) is expected
        # Every configured token is compared, whichever matches, over fixed-length digests.
        assert len(calls) == 3
        assert {len(a) for a, _ in calls} == {32}


@pytest.mark.parametrize(
    ("values", "named", "why"),
    [
        ({"AGENT_TOKEN": "change-me-agent-token-0001"}, "AGENT_TOKEN", "placeholder"),
        (
            {"HOST_SESSION_SECRET": "Change-Me-host-session-secret-000000001"},
            "HOST_SESSION_SECRET",
            "placeholder",
        ),
        ({"DATABASE_URL": "postgresql://lineup:change-me-postgres@db/lineup"}, "DATABASE_URL", "placeholder"),
        ({"OPERATOR_TOKEN": "abababababababababab"}, "OPERATOR_TOKEN", "too easy to guess"),
        ({"HOST_TOKEN": AGENT}, "AGENT_TOKEN and HOST_TOKEN", "share a token"),
        ({"OPERATOR_TOKEN": f"{OPERATOR} {HOST}"}, "HOST_TOKEN and OPERATOR_TOKEN", "share a token"),
        (
            {"HOST_SESSION_SECRET": HOST + "-and-some-more-to-be-long"},
            "HOST_SESSION_SECRET",
            "made from HOST_TOKEN",
        ),
        (
            {"HOST_SESSION_SECRET": HOST.upper() + "0123456789ABCDEF0"},
            "HOST_SESSION_SECRET",
            "made from HOST_TOKEN",
        ),
        ({"MCP_APP_SECRET": "change-me-mcp-app-secret-of-32-or-more"}, "MCP_APP_SECRET", "placeholder"),
        ({"MCP_APP_SECRET": "ab" * 20}, "MCP_APP_SECRET", "too easy to guess"),
        (
            {"MCP_APP_SECRET": f"app-secret-Zx9Wv8Ut7Sr6Qp5On4Ml3 {AGENT}-and-more-to-be-32-long"},
            "MCP_APP_SECRET",
            "made from AGENT_TOKEN",
        ),
    ],
)
def test_serve_refuses_weak_or_shared_secrets_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, values: dict[str, str], named: str, why: str
) -> None:
    set_env(monkeypatch, **{**GOOD, "HOST_SESSION_SECRET": SESSION_SECRET, **values})
    with pytest.raises(SettingsError, match=named) as refused:
        load_settings("serve")
    assert why in str(refused.value)


def test_an_mcp_app_secret_shorter_than_32_characters_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    set_env(monkeypatch, **GOOD, MCP_APP_SECRET="app-secret-Zx9Wv8Ut7Sr6Qp5On4Ml3-long-enough short-one")
    with pytest.raises(SettingsError, match=r"MCP_APP_SECRET: .*at least 32 characters"):
        load_settings("serve")


def test_the_relay_refuses_the_examples_or_a_guessable_webhook_secret(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    set_env(
        monkeypatch,
        DATABASE_URL=GOOD["DATABASE_URL"],
        AGENT_WEBHOOK_URL="http://agent:8200/webhooks",
        WEBHOOK_SECRET="whsec_change-me",
    )
    with pytest.raises(SettingsError, match="WEBHOOK_SECRET: still the example's placeholder"):
        load_settings("relay")
    monkeypatch.setenv("WEBHOOK_SECRET", "whsec_" + base64.b64encode(b"\x00" * 24).decode())
    with pytest.raises(SettingsError, match="WEBHOOK_SECRET: too easy to guess"):
        load_settings("relay")


def test_the_examples_values_cannot_start_anything(monkeypatch: pytest.MonkeyPatch) -> None:
    example = {}
    for line in (ROOT / ".env.example").read_text().splitlines():
        name, sep, value = line.partition("=")
        if sep and not line.startswith("#"):
            example[name] = value
    # docker-compose.yml gives each process its own DATABASE_URL, made of the example's passwords.
    urls = {
        "roles": f"postgresql://lineup:{example['POSTGRES_PASSWORD']}@postgres:5432/lineup",
        "migrate": f"postgresql://lineup_owner:{example['DB_OWNER_PASSWORD']}@postgres:5432/lineup",
        "serve": f"postgresql://lineup_runtime:{example['DB_RUNTIME_PASSWORD']}@postgres:5432/lineup",
        "relay": f"postgresql://lineup_relay:{example['DB_RELAY_PASSWORD']}@postgres:5432/lineup",
    }
    passwords = ("DB_OWNER_PASSWORD", "DB_RUNTIME_PASSWORD", "DB_RELAY_PASSWORD", "DB_READER_PASSWORD")
    for command, needs in [
        ("serve", ("AGENT_TOKEN", "HOST_TOKEN", "OPERATOR_TOKEN", "HOST_SESSION_SECRET", "DATABASE_URL")),
        ("relay", ("WEBHOOK_SECRET", "DATABASE_URL")),
        ("migrate", ("DATABASE_URL",)),
        ("roles", ("DATABASE_URL", *passwords)),
    ]:
        values = {k: v for k, v in example.items() if k.isupper()}
        set_env(monkeypatch, **values, DATABASE_URL=urls[command])
        with pytest.raises(SettingsError) as refused:
            load_settings(command)
        for name in needs:
            assert name in str(refused.value), (command, name, str(refused.value))


def test_the_dev_stacks_processes_skip_the_deployment_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    set_env(monkeypatch, **{**GOOD, "HOST_TOKEN": AGENT, "LINEUP_DEV_STACK": "true"})
    assert load_settings("serve").tokens("host") == (AGENT,)


def test_a_command_without_a_database_says_to_start_make_dev_or_set_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)  # no dev stack here
    assert main(["ops", "stats"]) == 2
    assert "DATABASE_URL (start `make dev` in this directory, or set DATABASE_URL)" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("target", "variables", "command"),
    [
        ("dev", ["PORT=8123"], "-m service dev --port 8123"),
        ("dev", [], "-m service dev --port 8000"),
        ("ops", ["ARGS=trace call-1"], "-m service ops trace call-1"),
    ],
)
def test_make_dev_takes_a_port_and_make_ops_its_arguments(
    target: str, variables: list[str], command: str
) -> None:
    done = subprocess.run(
        ["make", "--no-print-directory", "-n", "-o", ".venv/.installed", target, *variables],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    # The command, then (for ops) what quiets make's own error line at a terminal.
    assert re.search(rf"python {re.escape(command)}( \|\||$)", done.stdout.strip()), done.stdout

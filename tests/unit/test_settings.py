"""A missing or invalid variable stops the process at start with a message naming it."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.__main__ import main
from service.settings import SettingsError, load_settings

GOOD = {
    "DATABASE_URL": "postgresql://u@localhost/db",
    "AGENT_TOKEN": "a" * 20,
    "HOST_TOKEN": "h" * 20,
    "OPERATOR_TOKEN": "o" * 20,
}


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (*GOOD, "AGENT_WEBHOOK_URL", "WEBHOOK_SECRET", "RELAY_MAX_ATTEMPTS", "MANIFESTS_DIR"):
        monkeypatch.delenv(name, raising=False)


def set_env(monkeypatch: pytest.MonkeyPatch, **values: str) -> None:
    for name, value in values.items():
        monkeypatch.setenv(name, value)


def test_serve_settings_load_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    set_env(monkeypatch, **GOOD)
    settings = load_settings("serve")
    assert settings.tokens("agent") == ("a" * 20,)
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
    monkeypatch.setenv("AGENT_TOKEN", f"{'a' * 20} {'b' * 20}")
    assert load_settings("serve").tokens("agent") == ("a" * 20, "b" * 20)


def test_serve_exits_2_naming_the_missing_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    set_env(monkeypatch, **{k: v for k, v in GOOD.items() if k != "HOST_TOKEN"})
    assert main(["serve", "--port", "1"]) == 2
    assert "HOST_TOKEN" in capsys.readouterr().err


def test_serve_exits_2_naming_a_bad_manifest(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "interact.json").write_text('{"manifest_version": 1, "app_scope": "interact"}')
    set_env(monkeypatch, **GOOD, MANIFESTS_DIR=str(tmp_path))
    assert main(["serve", "--port", "1"]) == 2
    err = capsys.readouterr().err
    assert "interact.json" in err and "$" in err


def test_token_check_compares_against_every_token_in_constant_time(monkeypatch: pytest.MonkeyPatch) -> None:
    import hmac

    from service.api import auth

    calls: list[tuple[bytes, bytes]] = []
    original = hmac.compare_digest

    def counting(a: bytes, b: bytes) -> bool:
        calls.append((a, b))
        return original(a, b)

    monkeypatch.setattr(auth.hmac, "compare_digest", counting)
    book = auth.TokenBook({"agent": ["a" * 20, "b" * 20, "c" * 20]})
    for presented, expected in (("a" * 20, True), ("c" * 20, True), ("z" * 20, False), ("short", False)):
        calls.clear()
        assert book.accepts("agent", presented) is expected
        # Every configured token is compared, whichever matches, over fixed-length digests.
        assert len(calls) == 3
        assert {len(a) for a, _ in calls} == {32}

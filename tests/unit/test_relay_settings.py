"""The relay's settings stop it at start, naming the variable, when a value is unusable."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from service.settings import SettingsError, load_settings

SECRET_A = "whsec_" + base64.b64encode(b"relay-settings-secret-A-0123456789").decode()
SECRET_B = "whsec_" + base64.b64encode(b"relay-settings-secret-B-98765").decode().rstrip("=")


def relay_settings(**overrides: Any) -> Any:
    values: dict[str, Any] = {
        "database_url": "postgresql://relay@127.0.0.1/lineup",
        "agent_webhook_url": "https://agent.example/webhooks/lineup",
        "webhook_secret": SECRET_A,
    }
    values.update(overrides)
    return load_settings("relay", **values)


def test_several_space_separated_secrets_all_sign() -> None:
    assert relay_settings(webhook_secret=f"{SECRET_A}  {SECRET_B}").webhook_secrets == (SECRET_A, SECRET_B)


@pytest.mark.parametrize(
    "secret",
    ["plainpassword", "whsec_***not-base64***", "whsec_c2hvcnQ=", f"{SECRET_A} whsec_"],
)
def test_a_malformed_webhook_secret_is_refused_by_name_without_echoing_it(secret: str) -> None:
    with pytest.raises(SettingsError) as error:
        relay_settings(webhook_secret=secret)
    assert "WEBHOOK_SECRET" in str(error.value)
    assert secret not in str(error.value)


@pytest.mark.parametrize("url", ["agent.example/hook", "ftp://agent.example/hook", "http://", "http:///path"])
def test_an_agent_webhook_url_that_is_not_http_is_refused_by_name(url: str) -> None:
    with pytest.raises(SettingsError, match="AGENT_WEBHOOK_URL"):
        relay_settings(agent_webhook_url=url)


def test_the_relay_needs_its_url_and_secret() -> None:
    with pytest.raises(SettingsError, match="AGENT_WEBHOOK_URL, WEBHOOK_SECRET"):
        relay_settings(agent_webhook_url=None, webhook_secret=None)


def test_the_lease_is_at_least_thirty_seconds_and_three_timeouts() -> None:
    assert relay_settings().relay_lease == 30.0
    assert relay_settings(relay_timeout_seconds=20).relay_lease == 60.0
    assert relay_settings(relay_lease_seconds=2, relay_timeout_seconds=0.5).relay_lease == 2.0


def test_a_lease_shorter_than_one_attempt_is_refused() -> None:
    with pytest.raises(SettingsError, match="RELAY_LEASE_SECONDS"):
        relay_settings(relay_lease_seconds=5, relay_timeout_seconds=10)


def test_the_probe_port_is_off_unless_set_so_relays_on_one_host_never_collide() -> None:
    from relay.config import RelayConfig

    assert relay_settings().relay_metrics_port is None
    assert RelayConfig.from_settings(relay_settings()).metrics_port == 0
    assert RelayConfig.from_settings(relay_settings(relay_metrics_port=9201)).metrics_port == 9201

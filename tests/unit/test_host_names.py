"""Which ``Host`` values the token-less endpoints answer to (``service.host_names``)."""

from __future__ import annotations

import pytest

from service.host_names import HostAllowList, host_name
from service.settings import SettingsError, load_settings

ALLOW = HostAllowList.of("https://lineup.example:8443", ["service", "*.svc.cluster.local"])


@pytest.mark.parametrize(
    "header",
    [
        "lineup.example",
        "LINEUP.example.:443",
        "service:8000",
        "web.ns.svc.cluster.local",
        "localhost:8000",
        "app.localhost",
        "127.0.0.1:8000",
        "10.42.0.17",
        "[::1]:8000",
        "[fd00::7]",
    ],
)
def test_the_services_own_names_loopback_and_ip_literals_are_allowed(header: str) -> None:
    assert ALLOW.allows(header)


@pytest.mark.parametrize(
    "header",
    [
        "rebind.attacker",
        "rebind.attacker:8000",
        "lineup.example.attacker",
        "svc.cluster.local.attacker",
        "localhost.attacker",
        "127.0.0.1.nip.io",
        "service.attacker",
        "",
        "[::1",
    ],
)
def test_other_names_are_not(header: str) -> None:
    assert not ALLOW.allows(header)


def test_a_star_allows_any_name_and_an_absent_header_is_allowed() -> None:
    assert HostAllowList(["*"]).allows("anything.example")
    assert HostAllowList([]).allows(None)
    assert not HostAllowList([]).allows("anything.example")


def test_a_host_name_drops_its_port_and_brackets() -> None:
    assert host_name("Example.COM:80") == "example.com"
    assert host_name("[2001:db8::1]:8000") == "2001:db8::1"
    assert host_name("2001:db8::1") == "2001:db8::1"


@pytest.mark.parametrize("bad", ["https://lineup.example", "lineup.example/path", "*lineup.example", "a@b"])
def test_allowed_hosts_takes_names_only(bad: str) -> None:
    with pytest.raises(SettingsError, match="ALLOWED_HOSTS"):
        load_settings(allowed_hosts=bad)

"""The Web Host's session values: signed, expiring, bound to the HOST token that signed in."""

from __future__ import annotations

import pytest

from service.api.host_session import HostSessions

OLD, NEW = "old-host-token-000000001", "new-host-token-000000002"


def test_a_value_is_valid_until_it_expires() -> None:
    sessions = HostSessions([OLD], lifetime_seconds=60)
    value = sessions.issue(OLD, now=1_000)
    assert sessions.valid(value, now=1_059)
    assert not sessions.valid(value, now=1_060)


def test_every_replica_with_the_token_agrees_and_each_value_is_distinct() -> None:
    first, second = HostSessions([OLD]), HostSessions([NEW, OLD])
    value = first.issue(OLD)
    assert second.valid(value)
    assert first.issue(OLD) != value


def test_retiring_the_token_that_signed_in_ends_its_sessions() -> None:
    value = HostSessions([OLD, NEW]).issue(OLD)
    assert not HostSessions([NEW]).valid(value)


@pytest.mark.parametrize(
    "value",
    [None, "", "v1", "v1.1.2", "v2.99999999999.n.mac", "v1.-5.n.mac", "é" * 20, "v1." + "9" * 300],
)
def test_malformed_values_are_refused(value: str | None) -> None:
    assert not HostSessions([OLD]).valid(value)


def test_a_changed_expiry_breaks_the_signature() -> None:
    sessions = HostSessions([OLD])
    version, expires, nonce, mac = sessions.issue(OLD, now=1_000).split(".")
    assert not sessions.valid(".".join([version, str(int(expires) + 3600), nonce, mac]), now=1_000)

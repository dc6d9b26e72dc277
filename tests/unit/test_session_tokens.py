"""A person's session token: the session's id signed with HOST_SESSION_SECRET, nothing else."""

from __future__ import annotations

import uuid

import pytest

from relay.config import redacted
from service.use_cases.host_sessions import SessionTokens

SECRET = "a-host-session-secret-of-32-chars!!"
OTHER = "another-host-session-secret-0000000"


def test_a_token_reads_back_as_its_session_on_every_replica_with_the_secret() -> None:
    session_id = uuid.uuid4()
    token = SessionTokens(SECRET).token(session_id)
    assert SessionTokens(SECRET).session_id(token) == session_id
    assert str(session_id) not in token  # signed and encoded, not the bare id
    assert SessionTokens(SECRET).session_id(str(session_id)) is None


@pytest.mark.parametrize(
    "forge",
    [
        # The signature's first character: its last one partly encodes padding bits decoding ignores.
        lambda t: (
            t.rsplit(".", 1)[0]
            + "."
            + ("B" if t.rsplit(".", 1)[1][0] == "A" else "A")
            + t.rsplit(".", 1)[1][1:]
        ),
        lambda t: t.split(".")[0] + ".",
        lambda t: "x" + t,
        lambda t: "",
        lambda t: "é" * 20,
        lambda t: t * 20,
    ],
)
def test_a_changed_token_reads_as_nothing(forge: object) -> None:
    token = SessionTokens(SECRET).token(uuid.uuid4())
    assert SessionTokens(SECRET).session_id(forge(token)) is None  # type: ignore[operator]


def test_another_secret_or_none_reads_nothing() -> None:
    token = SessionTokens(SECRET).token(uuid.uuid4())
    assert SessionTokens(OTHER).session_id(token) is None
    assert SessionTokens(None).session_id(token) is None
    assert not SessionTokens(None).enabled


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://user:secret@agent.example:8443/hook?token=abc#x", "https://agent.example:8443/hook"),
        ("http://agent.example/webhooks/lineup", "http://agent.example/webhooks/lineup"),
        ("http://u:p@[::1]:9000/h?k=v", "http://[::1]:9000/h"),
    ],
)
def test_the_relay_logs_its_webhook_url_without_credentials(url: str, shown: str) -> None:
    assert redacted(url) == shown

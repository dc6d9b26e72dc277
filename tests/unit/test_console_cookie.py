"""The operator console's cookie: signed under the operator token used, checked against the tokens
configured now, and good for its lifetime only."""

from __future__ import annotations

from service.web.console_cookie import MAX_COOKIE_LENGTH, ConsoleSessions

OLD, NEW = "operator-token-old-000001", "operator-token-new-000002"


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def test_a_cookie_issued_under_any_configured_token_is_accepted() -> None:
    sessions = ConsoleSessions([OLD, NEW])
    assert sessions.valid(sessions.issue(OLD))
    assert sessions.valid(sessions.issue(NEW))
    assert sessions.issue(NEW) != sessions.issue(NEW)  # a nonce in each


def test_retiring_a_token_ends_the_sessions_it_opened() -> None:
    cookie = ConsoleSessions([OLD, NEW]).issue(OLD)
    assert not ConsoleSessions([NEW]).valid(cookie)
    assert not ConsoleSessions([]).valid(cookie)


def test_a_cookie_expires_after_its_lifetime() -> None:
    clock = Clock()
    sessions = ConsoleSessions([OLD], lifetime_seconds=60, clock=clock)
    cookie = sessions.issue(OLD)
    clock.now += 59
    assert sessions.valid(cookie)
    clock.now += 2
    assert not sessions.valid(cookie)


def test_a_cookie_from_the_future_is_refused() -> None:
    clock = Clock()
    issued = ConsoleSessions([OLD], clock=clock).issue(OLD)
    clock.now -= 120
    assert not ConsoleSessions([OLD], clock=clock).valid(issued)


def test_tampered_or_odd_values_are_refused() -> None:
    sessions = ConsoleSessions([OLD])
    cookie = sessions.issue(OLD)
    payload, stamp, mac = cookie.split(".")
    for value in (
        None,
        "",
        # The first character of the signature: the last one partly encodes padding bits, which
        # decoding ignores, so changing it may change nothing.
        f"{payload}.{stamp}.{'B' if mac[0] == 'A' else 'A'}{mac[1:]}",
        f"eyJub25jZSI6ImEifQ.{stamp}.{mac}",
        cookie + "é",
        "a" * (MAX_COOKIE_LENGTH + 1),
        "not.a.cookie",
    ):
        assert not sessions.valid(value), value

"""Pure rules of the Pomodoro operation and of tool-call idempotency."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from service.domain.idempotency import fingerprint
from service.domain.operations import focused_seconds
from service.domain.timefmt import rfc3339

T0 = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)


@given(elapsed=st.floats(min_value=0, max_value=20000), duration=st.integers(min_value=1, max_value=14400))
def test_focused_seconds_is_whole_and_never_more_than_asked(elapsed: float, duration: int) -> None:
    value = focused_seconds(T0, T0 + timedelta(seconds=elapsed), duration)
    assert 0 <= value <= duration
    assert value == min(duration, int(elapsed))


def test_fingerprint_compares_bodies_as_json_values() -> None:
    assert fingerprint({"a": 1, "b": [1, 2]}) == fingerprint({"b": [1, 2], "a": 1})
    assert fingerprint({"a": 1}) != fingerprint({"a": 2})
    assert fingerprint({"a": "é"}) == fingerprint({"a": "\u00e9"})


def test_rfc3339_is_utc_with_microseconds_and_z() -> None:
    moment = datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC) + timedelta(hours=0)
    assert rfc3339(moment) == "2026-01-02T03:04:05.000006Z"

"""Pure rules of the Pomodoro operation and of tool-call idempotency."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.domain.idempotency import fingerprint, is_recorded
from service.domain.operations import InterruptStatus, focused_seconds, late_interrupt_status, logical_end
from service.domain.timefmt import rfc3339

T0 = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)
WINDOW = timedelta(seconds=300)


def test_logical_end_of_completed_is_the_deadline_not_the_decision() -> None:
    assert logical_end("completed", T0, T0 + timedelta(seconds=40)) == T0


def test_logical_end_of_interrupted_is_the_decision() -> None:
    assert logical_end("interrupted", T0, T0 - timedelta(seconds=40)) == T0 - timedelta(seconds=40)


def test_focusing_has_no_logical_end() -> None:
    assert logical_end("focusing", T0, None) is None


@pytest.mark.parametrize(
    ("state", "finalized_offset", "now_offset", "expected"),
    [
        ("interrupted", -10, 0, InterruptStatus.ALREADY_FINAL),
        ("interrupted", -10, 290, InterruptStatus.ALREADY_FINAL),
        ("interrupted", -10, 291, InterruptStatus.NO_ACTIVE),
        ("completed", 900, 300, InterruptStatus.ALREADY_FINAL),  # settled late: the deadline counts
        ("completed", 0, 301, InterruptStatus.NO_ACTIVE),
        ("cancelled", -1, 0, InterruptStatus.ALREADY_FINAL),
        ("focusing", 0, 0, InterruptStatus.NO_ACTIVE),
    ],
)
def test_late_interrupt_receipt_depends_on_the_logical_end_and_the_window(
    state: str, finalized_offset: int, now_offset: int, expected: InterruptStatus
) -> None:
    finalized = None if state == "focusing" else T0 + timedelta(seconds=finalized_offset)
    assert late_interrupt_status(state, T0, finalized, T0 + timedelta(seconds=now_offset), WINDOW) is expected


@given(elapsed=st.floats(min_value=0, max_value=20000), duration=st.integers(min_value=1, max_value=14400))
def test_focused_seconds_is_whole_and_never_more_than_asked(elapsed: float, duration: int) -> None:
    value = focused_seconds(T0, T0 + timedelta(seconds=elapsed), duration)
    assert 0 <= value <= duration
    assert value == min(duration, int(elapsed))


def test_fingerprint_compares_bodies_as_json_values() -> None:
    assert fingerprint({"a": 1, "b": [1, 2]}) == fingerprint({"b": [1, 2], "a": 1})
    assert fingerprint({"a": 1}) != fingerprint({"a": 2})
    assert fingerprint({"a": "é"}) == fingerprint({"a": "\u00e9"})


@pytest.mark.parametrize(
    ("status", "recorded"), [(202, True), (200, True), (409, True), (401, False), (404, False), (422, False)]
)
def test_401_404_and_422_are_not_recorded(status: int, recorded: bool) -> None:
    assert is_recorded(status) is recorded


def test_rfc3339_is_utc_with_microseconds_and_z() -> None:
    moment = datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC) + timedelta(hours=0)
    assert rfc3339(moment) == "2026-01-02T03:04:05.000006Z"

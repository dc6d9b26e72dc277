"""When a relay opens the circuit, and how long it waits while paused or open."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from relay.circuit import FailureStreak, Look, is_endpoint_failure, is_endpoint_wide
from relay.policy import AttemptResult

NOW = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)
DOWN = AttemptResult(None, "ConnectError", "refused")


@pytest.mark.parametrize("status", [408, 429, 500, 502, 503, 504, 302])
def test_timeouts_throttling_server_errors_and_redirects_are_the_endpoints_failures(status: int) -> None:
    assert is_endpoint_failure(AttemptResult(status))
    assert is_endpoint_failure(AttemptResult(None, "Timeout"))


@pytest.mark.parametrize("status", [200, 204, 400, 401, 404, 422])
def test_an_answer_the_endpoint_gave_about_the_row_is_not(status: int) -> None:
    assert not is_endpoint_failure(AttemptResult(status))


def test_the_streak_opens_at_its_threshold() -> None:
    streak = FailureStreak(threshold=3)
    assert [streak.observe(uuid.uuid4(), NOW, DOWN) for _ in range(3)] == [False, False, True]
    assert streak.failures == 3 and len(streak.rows) == 3


@pytest.mark.parametrize("between", [AttemptResult(204), AttemptResult(422)])
def test_any_answer_about_a_row_breaks_the_streak(between: AttemptResult) -> None:
    streak = FailureStreak(threshold=3)
    streak.observe(uuid.uuid4(), NOW, DOWN)
    streak.observe(uuid.uuid4(), NOW, DOWN)
    assert not streak.observe(uuid.uuid4(), NOW, between)
    assert not streak.observe(uuid.uuid4(), NOW, DOWN)
    assert streak.failures == 1


def test_attempts_started_before_the_circuit_last_closed_do_not_count() -> None:
    streak = FailureStreak(threshold=2)
    streak.observe(uuid.uuid4(), NOW, DOWN)
    streak.circuit_closed_at(NOW + timedelta(seconds=1))
    assert streak.failures == 0
    assert not streak.observe(uuid.uuid4(), NOW, DOWN)  # in flight while it was open
    assert not streak.observe(uuid.uuid4(), NOW + timedelta(seconds=2), DOWN)
    assert streak.observe(uuid.uuid4(), NOW + timedelta(seconds=2), DOWN)


def test_seeing_the_same_close_again_keeps_the_streak() -> None:
    streak = FailureStreak(threshold=5)
    streak.circuit_closed_at(NOW)
    streak.observe(uuid.uuid4(), NOW + timedelta(seconds=1), DOWN)
    streak.circuit_closed_at(NOW)
    assert streak.failures == 1


def test_a_closed_circuit_waits_until_the_next_retry_at_most_the_poll() -> None:
    assert Look(0.2, False, "closed", None, False).wait(1.0) == 0.2
    assert Look(None, False, "closed", None, False).wait(1.0) == 1.0
    assert Look(30.0, False, "closed", None, False).wait(1.0) == 1.0


def test_an_open_circuit_waits_for_its_probe_not_for_retries() -> None:
    looked = Look(0.01, False, "open", 0.4, False)
    assert not looked.probe_due and looked.wait(1.0) == 0.4
    due = Look(0.01, False, "open", -0.1, False)
    assert due.probe_due


def test_nothing_is_probed_while_paused_or_while_another_probe_is_live() -> None:
    assert not Look(None, True, "open", -1.0, False).probe_due
    assert not Look(None, False, "half_open", -1.0, True).probe_due
    assert Look(0.01, True, "closed", None, False).wait(1.0) == 1.0


def test_a_probe_the_endpoint_fails_as_a_whole_spends_no_attempt_but_a_500_does() -> None:
    for wide in (
        AttemptResult(None, "ConnectTimeout"),
        AttemptResult(503),
        AttemptResult(502),
        AttemptResult(429),
    ):
        assert is_endpoint_wide(wide)
    assert is_endpoint_wide(AttemptResult(500, retry_after="5"))
    assert not is_endpoint_wide(AttemptResult(500)) and not is_endpoint_wide(AttemptResult(400))

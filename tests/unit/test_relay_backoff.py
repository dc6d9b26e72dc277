"""The retry policy: exponential backoff with jitter, Retry-After, and what each answer means."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from relay.backoff import jittered, parse_retry_after, retry_delay, retry_span
from relay.policy import AttemptResult, describe, verdict
from service.settings import Settings

NOW = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


@given(
    attempt=st.integers(min_value=1, max_value=10_000),
    base=st.floats(min_value=0.01, max_value=60),
    cap=st.floats(min_value=0.01, max_value=86_400),
    seed=st.integers(),
)
def test_a_wait_stays_between_half_and_all_of_the_capped_exponential(
    attempt: int, base: float, cap: float, seed: int
) -> None:
    ceiling = min(cap, base * 2.0 ** min(attempt - 1, 60))
    assert ceiling / 2 <= jittered(attempt, base, cap, random.Random(seed)) <= ceiling


class AlwaysHighest(random.Random):
    def uniform(self, a: float, b: float) -> float:
        return b


class AlwaysLowest(random.Random):
    def uniform(self, a: float, b: float) -> float:
        return a


def test_the_longest_wait_doubles_per_attempt_until_the_cap() -> None:
    top = AlwaysHighest()
    assert [jittered(n, 1.0, 10.0, top) for n in range(1, 7)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


def test_waits_are_spread_rather_than_synchronised() -> None:
    rng = random.Random(42)
    delays = {round(jittered(5, 1.0, 600.0, rng), 3) for _ in range(50)}
    assert len(delays) > 40


def test_the_default_schedule_retries_a_row_for_a_day_to_two_before_it_dies() -> None:
    settings = Settings()
    shortest, longest = retry_span(
        settings.relay_max_attempts, settings.relay_backoff_base_seconds, settings.relay_backoff_max_seconds
    )
    assert shortest >= 24 * 3600 and longest <= 49 * 3600
    # Drawn as the relay draws them, every wait at its lowest or highest, the span is the same.
    for rng in (AlwaysLowest(), AlwaysHighest()):
        waits = [
            jittered(n, settings.relay_backoff_base_seconds, settings.relay_backoff_max_seconds, rng)
            for n in range(1, settings.relay_max_attempts)
        ]
        assert sum(waits) in (shortest, longest)


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        ("5", 5.0),
        (" 120 ", 120.0),
        (format_datetime(NOW + timedelta(seconds=30), usegmt=True), 30.0),
        (format_datetime(NOW - timedelta(seconds=30), usegmt=True), 0.0),
        ("soon", None),
        ("-3", None),
        ("", None),
        (None, None),
    ],
)
def test_retry_after_is_read_as_seconds_or_an_http_date(header: str | None, seconds: float | None) -> None:
    assert parse_retry_after(header, NOW) == seconds


def test_a_retry_never_comes_sooner_than_retry_after_asks() -> None:
    delay = retry_delay(1, base=0.05, cap=600, retry_after="7", rng=random.Random(1))
    assert delay == 7.0


def test_retry_after_is_honoured_only_up_to_the_backoff_maximum() -> None:
    assert retry_delay(1, base=1, cap=600, retry_after="86400") == 600


def test_without_retry_after_the_delay_is_the_jittered_backoff() -> None:
    assert 2 <= retry_delay(3, base=1, cap=600, rng=random.Random(3)) <= 4


@pytest.mark.parametrize("status", [200, 201, 202, 204, 299])
def test_any_2xx_delivers(status: int) -> None:
    assert verdict(AttemptResult(status), attempts=1, max_attempts=25) == "delivered"


@pytest.mark.parametrize("status", [408, 429, 500, 502, 503, 504, 301, 302, 307, 308])
def test_timeouts_throttling_server_errors_and_redirects_are_retried(status: int) -> None:
    assert verdict(AttemptResult(status), attempts=1, max_attempts=25) == "retry"


@pytest.mark.parametrize("status", [400, 401, 403, 404, 410, 413, 422])
def test_other_client_errors_are_dead_at_once(status: int) -> None:
    assert verdict(AttemptResult(status), attempts=1, max_attempts=25) == "dead"


@pytest.mark.parametrize("error", ["Timeout", "ConnectError", "ReadError", "RemoteProtocolError"])
def test_transport_errors_are_retried(error: str) -> None:
    assert verdict(AttemptResult(None, error), attempts=3, max_attempts=25) == "retry"


def test_the_last_allowed_attempt_turns_a_retry_into_dead() -> None:
    assert verdict(AttemptResult(503), attempts=25, max_attempts=25) == "dead"
    assert verdict(AttemptResult(None, "ConnectError"), attempts=25, max_attempts=25) == "dead"
    assert verdict(AttemptResult(204), attempts=25, max_attempts=25) == "delivered"


def test_last_error_names_the_status_or_the_error_class() -> None:
    assert describe(AttemptResult(503, excerpt="busy")) == "HTTP 503: busy"
    assert describe(AttemptResult(None, "ConnectError", "refused")) == "ConnectError: refused"

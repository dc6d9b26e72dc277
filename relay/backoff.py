"""When to try a failed delivery again: exponential backoff with jitter, and ``Retry-After``.

Each wait is drawn between half and all of min(cap, base * 2**(attempt-1)) ("equal jitter"): spread
enough that rows failing together do not come back together, and with a floor, so that the time
a row is retried for before it dies has a lower bound an operator can rely on (``retry_span``).
"""

from __future__ import annotations

import random
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

# 2**60 seconds is far beyond any cap; stopping the exponent there keeps the float finite.
_MAX_EXPONENT = 60


def ceiling(attempt: int, base: float, cap: float) -> float:
    """The longest wait after failed attempt number ``attempt`` (1 = the first)."""
    return min(cap, base * 2.0 ** min(max(attempt - 1, 0), _MAX_EXPONENT))


def jittered(attempt: int, base: float, cap: float, rng: random.Random | None = None) -> float:
    """A wait drawn uniformly from [ceiling / 2, ceiling]."""
    top = ceiling(attempt, base, cap)
    return (rng or random).uniform(top / 2, top)


def retry_span(max_attempts: int, base: float, cap: float) -> tuple[float, float]:
    """The shortest and the longest time from a row's first failed attempt to its last, when every
    attempt fails: the waits after attempts 1 .. max_attempts - 1 (a pause or an open circuit
    adds to it; rows they hold spend no attempts)."""
    longest = sum(ceiling(n, base, cap) for n in range(1, max_attempts))
    return longest / 2, longest


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds asked for by a ``Retry-After`` header (delta-seconds or HTTP-date); None if absent or bad."""
    if value is None:
        return None
    value = value.strip()
    if not value:
        return None
    if value.isdigit():
        return float(value)
    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return max(0.0, (moment - (now or datetime.now(UTC))).total_seconds())


def retry_delay(
    attempt: int,
    *,
    base: float,
    cap: float,
    retry_after: str | None = None,
    now: datetime | None = None,
    rng: random.Random | None = None,
) -> float:
    """The delay before the next attempt: never sooner than the receiver asked, never beyond ``cap``."""
    delay = jittered(attempt, base, cap, rng)
    asked = parse_retry_after(retry_after, now)
    if asked is not None:
        delay = max(delay, asked)
    return min(delay, cap)

"""When to try a failed delivery again: exponential backoff with full jitter, and ``Retry-After``."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

# 2**60 seconds is far beyond any cap; stopping the exponent there keeps the float finite.
_MAX_EXPONENT = 60


def full_jitter(attempt: int, base: float, cap: float, rng: random.Random | None = None) -> float:
    """A delay drawn uniformly from [0, min(cap, base * 2**(attempt-1))] (AWS "full jitter")."""
    ceiling = min(cap, base * 2.0 ** min(max(attempt - 1, 0), _MAX_EXPONENT))
    return (rng or random).uniform(0.0, ceiling)


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
    delay = full_jitter(attempt, base, cap, rng)
    asked = parse_retry_after(retry_after, now)
    if asked is not None:
        delay = max(delay, asked)
    return min(delay, cap)

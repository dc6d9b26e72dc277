"""The database's clock for what the relay stamps: a webhook's ``webhook-timestamp`` and its
attempt's ``started_at``.

A Standard Webhooks receiver refuses a timestamp more than five minutes from its own clock, so a
relay host whose clock drifted an hour would have every delivery refused (retried, then dead). The
database's clock decides everything else here (deadlines, leases, backoff), so it decides this too,
with no extra statement: a claim writes its lease as the database's ``clock_timestamp()`` plus
``lease_seconds`` and the relay reads ``time.monotonic()`` just before it (``Claim.claimed_at``), so
the database's time now is the lease, less ``lease_seconds``, plus the monotonic time since — late by
at most the claim's round trip. The host's own clock is only compared with it: the offset is a
gauge, and a log line says when it passes ``SKEW_WARNING_SECONDS`` (and when it is back within).
"""

from __future__ import annotations

import time

import structlog
from prometheus_client import Gauge

from relay.claims import Claim

log = structlog.get_logger("relay")

#: How far the host's clock may be from the database's before the relay says so.
SKEW_WARNING_SECONDS = 5.0
#: The warning is repeated at most this often while the skew lasts.
SKEW_LOG_INTERVAL = 300.0


def database_time(claim: Claim, lease_seconds: float) -> float:
    """The database's clock now (POSIX seconds), from ``claim``'s lease."""
    return claim.lease.timestamp() - lease_seconds + (time.monotonic() - claim.claimed_at)


class ClockSkew:
    """The host clock's offset from the database's, as a gauge and a rate-limited log line."""

    def __init__(self, gauge: Gauge) -> None:
        self._gauge = gauge
        self._warned_at: float | None = None

    def observe(self, database_now: float, host_now: float) -> None:
        offset = host_now - database_now
        self._gauge.set(offset)
        skewed = abs(offset) > SKEW_WARNING_SECONDS
        now = time.monotonic()
        if skewed and (self._warned_at is None or now - self._warned_at >= SKEW_LOG_INTERVAL):
            self._warned_at = now
            log.warning(
                "relay_clock_skew",
                host_ahead_seconds=round(offset, 3),
                hint="webhooks are stamped with the database's clock; fix the host's clock (NTP)",
            )
        elif not skewed and self._warned_at is not None:
            self._warned_at = None
            log.info("relay_clock_skew_gone", host_ahead_seconds=round(offset, 3))

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
from service.clock_skew import SKEW_WARNING_SECONDS as SKEW_WARNING_SECONDS
from service.clock_skew import ClockSkew as ClockSkew

log = structlog.get_logger("relay")


def database_time(claim: Claim, lease_seconds: float) -> float:
    """The database's clock now (POSIX seconds), from ``claim``'s lease."""
    return claim.lease.timestamp() - lease_seconds + (time.monotonic() - claim.claimed_at)


def relay_skew(gauge: Gauge) -> ClockSkew:
    """The relay's: ``relay_clock_skew`` lines."""
    return ClockSkew(gauge, event="relay_clock_skew", logger=log)

"""The database's clock as a process sees it, and how far the host's own clock is from it.

The database's clock decides (docs/design.md, "The clocks that matter"): deadlines, leases, retry
times and every recorded time are its ``now()`` and ``clock_timestamp()``. A process still needs
"now" for what it does between statements — how long to sleep until a deadline it was told of,
when a sign-in it hands out ends, the time of a sample it keeps — and the host's clock may be
minutes or hours off. So ``serve`` measures the offset on a statement it runs anyway (the gauges'
sample, every 15 s: the database's ``clock_timestamp()`` against the middle of the round trip) and
reads the database's time as ``time.time()`` less that offset (:data:`CLOCK`). The offset is a
gauge (``lineup_clock_offset_seconds``), and a log line says when it passes
``SKEW_WARNING_SECONDS`` (again at most every ``SKEW_LOG_INTERVAL``) and when it is back within.
The relay stamps its webhooks the same way (``relay.clock``), with its own gauge and line.
"""

from __future__ import annotations

import time

from prometheus_client import Gauge

from service.clock_skew import ClockSkew


class DatabaseClock:
    """``now()``: the database's time (POSIX seconds) as the host's clock, corrected by the offset
    last measured; the host's own until a first measurement."""

    def __init__(self, skew: ClockSkew) -> None:
        self.skew = skew

    def observe(self, database_now: float, sent: float, received: float) -> None:
        """The database read ``database_now`` on its clock between ``sent`` and ``received`` on
        the host's (``time.time()`` around the round trip)."""
        self.skew.observe(database_now, (sent + received) / 2)

    def now(self) -> float:
        return time.time() - self.skew.offset


OFFSET = Gauge(
    "lineup_clock_offset_seconds",
    "How far this serve host's clock is ahead of the database's (negative: behind), at the last "
    "sample; the database's clock decides.",
)
#: ``serve``'s view of the database's clock, measured by the gauges' sample
#: (``service.use_cases.maintenance``).
CLOCK = DatabaseClock(ClockSkew(OFFSET))

"""A host clock's offset from the database's, as a gauge and a rate-limited log line: ``serve``'s
(``service.clock``) and each relay's (``relay.clock``). It imports no gauge of its own, so the relay
registers none of the service's."""

from __future__ import annotations

import time
from typing import Any

import structlog
from prometheus_client import Gauge

#: How far a host's clock may be from the database's before the process says so.
SKEW_WARNING_SECONDS = 5.0
#: The warning is repeated at most this often while the skew lasts.
SKEW_LOG_INTERVAL = 300.0


class ClockSkew:
    """The host clock's offset from the database's, as a gauge and a rate-limited log line
    (``event``, then ``event`` + ``_gone`` once it is back within the bound)."""

    def __init__(self, gauge: Gauge, *, event: str = "clock_skew", logger: Any = None) -> None:
        self._gauge = gauge
        self._event = event
        self._log = logger if logger is not None else structlog.get_logger("service.clock")
        self._warned_at: float | None = None
        self.offset = 0.0

    def observe(self, database_now: float, host_now: float) -> None:
        offset = self.offset = host_now - database_now
        self._gauge.set(offset)
        skewed = abs(offset) > SKEW_WARNING_SECONDS
        now = time.monotonic()
        if skewed and (self._warned_at is None or now - self._warned_at >= SKEW_LOG_INTERVAL):
            self._warned_at = now
            self._log.warning(
                self._event,
                host_ahead_seconds=round(offset, 3),
                hint="the database's clock decides; fix the host's clock (NTP)",
            )
        elif not skewed and self._warned_at is not None:
            self._warned_at = None
            self._log.info(f"{self._event}_gone", host_ahead_seconds=round(offset, 3))

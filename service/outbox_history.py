"""The outbox's depth over the last hour, as this process sampled it (for the operator console).

``serve``'s maintenance loop samples the outbox gauges every 15 s; each sample is also kept here, an
hour of them, so the console can draw the queue over time without a metrics server. Every replica
samples the same database, so any replica's history tells the same story; a restart starts afresh.
"""

from __future__ import annotations

from collections import deque
from datetime import UTC, datetime, timedelta
from typing import Any

from service.clock import CLOCK
from service.domain.timefmt import rfc3339

KEEP = timedelta(hours=1)


class OutboxHistory:
    def __init__(self, keep: timedelta = KEEP) -> None:
        self.keep = keep
        self._samples: deque[dict[str, Any]] = deque()

    def add(
        self, pending: int, dead: int, oldest_pending_age_seconds: float, at: datetime | None = None
    ) -> None:
        moment = at or datetime.fromtimestamp(CLOCK.now(), UTC)
        self._samples.append(
            {
                "at": rfc3339(moment),
                "pending": pending,
                "dead": dead,
                "oldest_pending_age_seconds": round(oldest_pending_age_seconds, 3),
                "_moment": moment,
            }
        )
        while self._samples and self._samples[0]["_moment"] < moment - self.keep:
            self._samples.popleft()

    def samples(self) -> list[dict[str, Any]]:
        """Oldest first: ``{"at", "pending", "dead", "oldest_pending_age_seconds"}``."""
        return [{k: v for k, v in sample.items() if k != "_moment"} for sample in self._samples]

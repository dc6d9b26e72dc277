"""How late a process's event loop runs what is due: ``lineup_event_loop_lag_seconds``.

A process of ours does everything on one event loop, so whatever it has to do — answer a request,
read a statement's result, deliver a webhook — waits while the loop is busy with something else or
while the process waits for a core. ``LoopLag`` asks to be woken every ``interval`` seconds and
observes how much later than that it actually was. A lag of a few milliseconds on a replica under
load is every call waiting its turn for that long; a lag that climbs with the load says the
process is short of CPU (add replicas, or cores), not that the database is slow.

One timer per interval (two a second by default): nothing on any request's path.
"""

from __future__ import annotations

import asyncio

from prometheus_client import REGISTRY, CollectorRegistry, Histogram

from service.background import sleep_until

BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)


def lag_histogram(registry: CollectorRegistry) -> Histogram:
    return Histogram(
        "lineup_event_loop_lag_seconds",
        "How much later than asked the process's event loop woke a timer (sampled every 0.5 s).",
        buckets=BUCKETS,
        registry=registry,
    )


_DEFAULT: list[Histogram] = []


def default_lag_histogram() -> Histogram:
    """The service's, in the default registry (``/metrics`` of ``serve``), made on first use."""
    if not _DEFAULT:
        _DEFAULT.append(lag_histogram(REGISTRY))
    return _DEFAULT[0]


class LoopLag:
    """A loop that observes its own timer's lateness every ``interval`` seconds."""

    name = "event-loop-lag"

    def __init__(self, histogram: Histogram, interval: float = 0.5) -> None:
        self.histogram = histogram
        self.interval = interval
        self._rounds = 0

    @property
    def rounds(self) -> int:
        return self._rounds

    async def run(self, stop: asyncio.Event) -> None:
        loop = asyncio.get_running_loop()
        while not stop.is_set():
            asked = loop.time() + self.interval
            await sleep_until(self.interval, stop)
            if stop.is_set():
                return
            self.histogram.observe(max(0.0, loop.time() - asked))
            self._rounds += 1

"""LoopLag (service.loop_lag): how much later than asked the event loop woke its timer."""

from __future__ import annotations

import asyncio
import time

from prometheus_client import CollectorRegistry

from service.loop_lag import LoopLag, lag_histogram
from tests.support.waiting import until


def observed(registry: CollectorRegistry) -> tuple[float, float]:
    """(the count, the sum) of lineup_event_loop_lag_seconds."""
    count = registry.get_sample_value("lineup_event_loop_lag_seconds_count") or 0.0
    total = registry.get_sample_value("lineup_event_loop_lag_seconds_sum") or 0.0
    return count, total


async def test_a_loop_blocked_past_the_timer_is_observed_as_that_much_lag() -> None:
    registry = CollectorRegistry()
    lag = LoopLag(lag_histogram(registry), interval=0.05)
    stop = asyncio.Event()
    task = asyncio.ensure_future(lag.run(stop))
    await asyncio.sleep(0.01)  # the loop has asked for its first wake-up, due in 0.04 s
    time.sleep(0.3)  # noqa: ASYNC251 - the event loop does nothing else for 0.3 s: the timer fires ~0.26 s late
    await until(lambda: lag.rounds >= 1)
    stop.set()
    await asyncio.wait_for(task, 5)
    count, total = observed(registry)
    assert count >= 1
    assert total >= 0.2  # a lower bound: a slower machine only adds to it
    assert registry.get_sample_value("lineup_event_loop_lag_seconds_bucket", {"le": "0.1"}) == 0


async def test_the_loop_ends_at_its_stop_without_observing_the_cut_wait() -> None:
    registry = CollectorRegistry()
    lag = LoopLag(lag_histogram(registry), interval=60)
    stop = asyncio.Event()
    task = asyncio.ensure_future(lag.run(stop))
    await asyncio.sleep(0.01)
    stop.set()
    await asyncio.wait_for(task, 5)
    assert lag.rounds == 0
    assert observed(registry) == (0.0, 0.0)

"""The per-call path's counts and durations are held in plain Python and added to their metrics when
the registry is read: what a scrape shows is what counting each one at once would have shown."""

from __future__ import annotations

import math
import re

from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from service.metrics import Batched

BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 6, 15, 30)
AMOUNTS = st.sampled_from([0.0, *BUCKETS, 31.0]) | st.floats(min_value=-1, max_value=60, allow_nan=False)


def _metrics(registry: CollectorRegistry) -> tuple[Counter, Histogram]:
    calls = Counter("calls", "Calls.", ["tool", "outcome"], registry=registry)
    seconds = Histogram("seconds", "Seconds.", ["tool"], buckets=BUCKETS, registry=registry)
    return calls, seconds


def _same_scrape(batched: CollectorRegistry, direct: CollectorRegistry) -> None:
    """Every line the same but the creation times; a sum the same but for its rounding (the held
    durations are summed before they are added)."""

    def lines(registry: CollectorRegistry) -> list[str]:
        text = generate_latest(registry).decode()
        return [line for line in text.splitlines() if not re.match(r"\w+_created\{", line)]

    ours, theirs = lines(batched), lines(direct)
    assert len(ours) == len(theirs)
    for mine, expected in zip(ours, theirs, strict=True):
        if re.match(r"seconds_sum\{", expected):
            name, value = expected.rsplit(" ", 1)
            assert mine.rsplit(" ", 1)[0] == name
            assert math.isclose(float(mine.rsplit(" ", 1)[1]), float(value), rel_tol=1e-9, abs_tol=1e-9)
        else:
            assert mine == expected


@given(
    calls=st.lists(
        st.tuples(
            st.sampled_from(["start", "interrupt"]), st.sampled_from(["accepted", "replayed"]), AMOUNTS
        ),
        max_size=40,
    ),
    scrape_after=st.integers(min_value=0, max_value=40),
)
def test_a_scrape_shows_what_counting_each_call_at_once_shows(
    calls: list[tuple[str, str, float]], scrape_after: int
) -> None:
    direct = CollectorRegistry()
    direct_calls, direct_seconds = _metrics(direct)
    batched_registry = CollectorRegistry()
    batched = Batched()
    batched_registry.register(batched)  # first, as in service.metrics
    batched_calls, batched_seconds = _metrics(batched_registry)
    for index, (tool, outcome, amount) in enumerate(calls):
        if index == scrape_after:  # a scrape in the middle adds what was held so far
            _same_scrape(batched_registry, direct)
        direct_calls.labels(tool, outcome).inc()
        direct_seconds.labels(tool).observe(amount)
        batched.count(batched_calls.labels(tool, outcome))
        batched.observe(batched_seconds.labels(tool), amount)
    _same_scrape(batched_registry, direct)

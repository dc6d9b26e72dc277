"""What the relay holds: the rows whose lease may have run out are left out of its next claims, and
its per-delivery histograms read as prometheus_client's own."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from prometheus_client import CollectorRegistry, Histogram, generate_latest

from relay.claimer import LEASE_MARGIN, lease_ending
from relay.claims import Claim
from relay.metrics import LoopHistogram


def held_claim(claimed_at: float) -> Claim:
    now = datetime.now(UTC)
    return Claim(uuid.uuid4(), "call-1", "conv-1", 1, 1, now, now, b"{}", claimed_at=claimed_at)


def test_only_rows_claimed_nearly_a_lease_ago_are_left_out_of_the_next_claim() -> None:
    now, lease = 1000.0, 30.0
    old = held_claim(now - lease)
    edge = held_claim(now - lease + LEASE_MARGIN)
    fresh = held_claim(now - lease + LEASE_MARGIN + 0.5)
    held = {c.event_id: c for c in (old, edge, fresh)}
    assert lease_ending(held, lease, now) == [old.event_id, edge.event_id]
    assert lease_ending({fresh.event_id: fresh}, lease, now) == []


def test_a_loop_histogram_reads_as_a_prometheus_histogram() -> None:
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    buckets = (0.005, 0.01, 0.5, 1, 30)
    mine = LoopHistogram("x_seconds", "X.", buckets=buckets, registry=ours)
    reference = Histogram("x_seconds", "X.", buckets=buckets, registry=theirs)
    for value in (0.001, 0.005, 0.0051, 0.7, 1.0, 31.0, 0.0):
        mine.observe(value)
        reference.observe(value)
    expected = [line for line in generate_latest(theirs).decode().splitlines() if "_created" not in line]
    assert generate_latest(ours).decode().splitlines() == expected

"""After-commit wake-ups: what one coalesced NOTIFY says, and what a listener reads from it."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from service.wakeups import (
    ALL_CONVERSATIONS,
    MAX_PAYLOAD_BYTES,
    Wakeups,
    parse_projection_payload,
    projection_payloads,
)


def test_a_payload_names_every_conversation_changed() -> None:
    payloads = projection_payloads({"b", "a", "c d"})
    assert payloads == ['["a","b","c d"]']
    assert parse_projection_payload(payloads[0]) == ["a", "b", "c d"]


def test_payloads_stay_under_the_notify_limit_and_too_many_mean_all() -> None:
    names = {f"conversation-{n:05d}-" + "x" * 200 for n in range(100)}
    payloads = projection_payloads(names)
    assert len(payloads) > 1
    assert all(len(p.encode()) <= MAX_PAYLOAD_BYTES for p in payloads)
    assert {n for p in payloads for n in json.loads(p)} == names
    assert projection_payloads({f"c{n}-" + "y" * 250 for n in range(1000)}) == [ALL_CONVERSATIONS]
    assert parse_projection_payload(ALL_CONVERSATIONS) is None


def test_a_payload_of_the_triggers_before_0005_names_its_conversation() -> None:
    assert parse_projection_payload("41 conv with spaces") == ["conv with spaces"]


def test_local_waiters_are_woken_at_once() -> None:
    wakeups = Wakeups()
    woken: list[str] = []
    deadlines: list[datetime] = []
    wakeups.on_conversation(woken.append)
    wakeups.on_deadline(deadlines.append)
    soon = datetime.now(UTC) + timedelta(seconds=1)
    wakeups.committed(["a", "b"], deadline=soon)
    assert woken == ["a", "b"]
    assert deadlines == [soon]

"""An operator's pause: every relay stops sending within a second, held rows spend no attempts, and
a resume wakes the relays so the rows go at once."""

from __future__ import annotations

import time
from typing import Any

import psycopg

from harness.receiver import Receiver, Reply, always, new_secret
from service.use_cases import delivery_control
from tests.support.ops_cli import as_operator
from tests.support.outbox import outbox_rows, queue_across, relay_config, running_relay, wait_until

Db = psycopg.Connection[dict[str, Any]]


def test_a_paused_relay_sends_nothing_and_a_resume_delivers_at_once(database_url: str, db: Db) -> None:
    secret = new_secret()
    as_operator(database_url, lambda rt: delivery_control.pause(rt, by="test", reason="Agent deploy"))
    # A poll far longer than the test: only the claim's gate and the resume's wake-up act here.
    with (
        Receiver([secret]) as agent,
        running_relay(relay_config(database_url, agent.url, [secret], poll_interval=30.0)),
    ):
        queued = queue_across(db, conversations=5, per_conversation=2)
        time.sleep(1.5)
        assert agent.snapshot() == []
        assert {row["attempts"] for row in outbox_rows(db).values()} == {0}
        as_operator(database_url, lambda rt: delivery_control.resume(rt, by="test"))
        resumed = time.monotonic()
        agent.wait_for_accepted({q.event_id for q in queued}, timeout=10)
        assert time.monotonic() - resumed < 2.0


def test_a_pause_stops_a_busy_relay_within_a_second(database_url: str, db: Db) -> None:
    secret = new_secret()
    queue_across(db, conversations=60, per_conversation=1)
    with (
        Receiver([secret], responder=always(204, delay=0.05)) as agent,
        running_relay(relay_config(database_url, agent.url, [secret], concurrency=2, poll_interval=30.0)),
    ):
        wait_until(lambda: len(agent.snapshot()) >= 5)
        as_operator(database_url, lambda rt: delivery_control.pause(rt, by="test", reason=None))
        paused = time.time()
        time.sleep(2.0)
        late = [d for d in agent.snapshot() if d.arrived_at > paused + 1.0]
        held = [row for row in outbox_rows(db).values() if row["status"] == "pending"]
    assert late == []
    assert held and all(row["attempts"] == 0 for row in held)


def test_a_pause_does_not_stop_the_answer_to_a_request_already_sent(database_url: str, db: Db) -> None:
    secret = new_secret()
    (queued,) = queue_across(db, conversations=1, per_conversation=1)
    with (
        Receiver([secret], responder=lambda _d, _e: Reply(204, delay=0.5)) as agent,
        running_relay(relay_config(database_url, agent.url, [secret], timeout=2.0)),
    ):
        wait_until(lambda: agent.snapshot())
        as_operator(database_url, lambda rt: delivery_control.pause(rt, by="test", reason=None))
        wait_until(lambda: outbox_rows(db)[queued.event_id]["status"] == "delivered")

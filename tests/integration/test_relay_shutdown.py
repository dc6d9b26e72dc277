"""Stopping a relay (what SIGTERM does) finishes or hands back what it holds: no row stays leased."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from harness.receiver import Receiver, Reply, always, new_secret
from relay import claims
from tests.support.outbox import (
    attempt_rows,
    outbox_rows,
    queue_across,
    queue_results,
    relay_config,
    running_relay,
    wait_until,
)

Db = psycopg.Connection[dict[str, Any]]


def test_stopping_lets_in_flight_deliveries_finish_and_records_them(database_url: str, db: Db) -> None:
    secret = new_secret()
    queued = queue_across(db, conversations=6, per_conversation=2)
    with (
        Receiver([secret], responder=always(204, delay=0.4)) as agent,
        running_relay(relay_config(database_url, agent.url, [secret], shutdown_grace=3.0)) as run,
    ):
        agent.wait_until(lambda deliveries: len(deliveries) >= 3)
        run.stop()
    rows = outbox_rows(db)
    assert all(row["lease_owner"] is None for row in rows.values())
    sent = {d.event_id for d in agent.snapshot()}
    assert sent, "nothing was in flight"
    assert all(rows[event_id]["status"] == "delivered" for event_id in sent)
    assert {row["status"] for row in rows.values()} <= {"delivered", "pending"}
    assert len(rows) == len(queued)


def test_an_attempt_outlasting_the_grace_period_is_cut_and_its_row_handed_back(
    database_url: str, db: Db
) -> None:
    secret = new_secret()
    (queued,) = queue_results(db, "conv-hang")
    with (
        Receiver([secret], responder=always(204, hang=5.0)) as agent,
        running_relay(
            relay_config(database_url, agent.url, [secret], timeout=4.0, shutdown_grace=0.2)
        ) as run,
    ):
        agent.wait_until(lambda deliveries: len(deliveries) == 1)
        run.stop()
    row = outbox_rows(db)[queued.event_id]
    assert row["status"] == "pending"
    assert row["lease_owner"] is None
    (attempt,) = attempt_rows(db, queued.event_id)
    assert (attempt["error_class"], attempt["outcome"]) == ("RelayShutdown", "retry")
    due = db.execute("SELECT next_attempt_at <= now() AS due FROM outbox").fetchone()
    assert due == {"due": True}


def test_a_relay_restarted_under_the_same_id_takes_back_its_old_leases(database_url: str, db: Db) -> None:
    secret = new_secret()
    (queued,) = queue_results(db, "conv-restart")
    db.execute(
        "UPDATE outbox SET lease_owner = 'relay-fixed', lease_expires_at = now() + interval '1 hour', attempts = 1"
    )
    with (
        Receiver([secret]) as agent,
        running_relay(relay_config(database_url, agent.url, [secret], relay_id="relay-fixed")),
    ):
        agent.wait_for_accepted({queued.event_id}, timeout=5)
    assert outbox_rows(db)[queued.event_id]["attempts"] == 2
    assert [d.reply for d in agent.snapshot()] == [Reply()]


def test_a_relay_whose_outcome_writer_breaks_stops_with_an_error_and_hands_rows_back(
    database_url: str, db: Db, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = new_secret()
    (queued,) = queue_results(db, "conv-bug")

    async def broken(*_: object, **__: object) -> dict[Any, str]:
        raise ZeroDivisionError("a bug in the writer")

    monkeypatch.setattr(claims, "record_outcomes", broken)

    def deliver_until_the_writer_breaks(agent: Receiver) -> None:
        with running_relay(relay_config(database_url, agent.url, [secret])):
            agent.wait_for_accepted({queued.event_id})
            wait_until(lambda: outbox_rows(db)[queued.event_id]["lease_owner"] is None)

    with Receiver([secret]) as agent, pytest.raises(RuntimeError, match="helper task failed"):
        deliver_until_the_writer_breaks(agent)
    assert outbox_rows(db)[queued.event_id]["status"] == "pending"

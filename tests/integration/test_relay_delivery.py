"""A relay delivers each committed result to the Agent: signed, with stable ids, the stored body."""

from __future__ import annotations

import json
from typing import Any

import psycopg

from harness.receiver import Receiver, new_secret
from tests.support.outbox import (
    attempt_rows,
    outbox_rows,
    queue_results,
    relay_config,
    running_relay,
    wait_until,
)

Db = psycopg.Connection[dict[str, Any]]


def test_every_result_is_signed_by_each_secret_of_a_rotation(database_url: str, db: Db) -> None:
    old, new = new_secret(), new_secret()
    queued = queue_results(db, "conv-rotation", 2) + queue_results(db, "conv-other", 1)
    with Receiver([old, new]) as agent, running_relay(relay_config(database_url, agent.url, [old, new])):
        deliveries = agent.wait_for_accepted({q.event_id for q in queued})
    assert len(deliveries) == 3
    for delivery in deliveries:
        # A receiver holding only the old secret, or only the new one, accepts the same request.
        assert delivery.verified_by == (0, 1)
        assert len(delivery.headers["webhook-signature"].split(" ")) == 2


def test_a_receiver_that_knows_only_one_rotated_secret_accepts(database_url: str, db: Db) -> None:
    old, new = new_secret(), new_secret()
    queued = queue_results(db, "conv-new-only")
    with Receiver([new]) as agent, running_relay(relay_config(database_url, agent.url, [old, new])):
        (delivery,) = agent.wait_for_accepted({queued[0].event_id})
    assert delivery.verified_by == (0,)


def test_the_post_carries_the_event_id_idempotency_key_and_stored_payload(database_url: str, db: Db) -> None:
    secret = new_secret()
    (queued,) = queue_results(db, "conv-headers")
    stored = outbox_rows(db)[queued.event_id]
    with Receiver([secret]) as agent, running_relay(relay_config(database_url, agent.url, [secret])) as run:
        (delivery,) = agent.wait_for_accepted({queued.event_id})
        wait_until(lambda: outbox_rows(db)[queued.event_id]["status"] == "delivered")
        relay_id = run.relay.config.relay_id
    assert delivery.headers["webhook-id"] == queued.event_id
    assert delivery.headers["idempotency-key"] == queued.tool_call_id
    assert delivery.headers["content-type"] == "application/json"
    assert json.loads(delivery.body) == stored["payload"]
    assert delivery.payload["sequence"] == queued.sequence == 1
    assert delivery.payload["type"] == "tool.result"

    row = outbox_rows(db)[queued.event_id]
    assert row["attempts"] == 1
    assert row["delivered_at"] is not None
    assert row["lease_owner"] is None and row["lease_expires_at"] is None
    (attempt,) = attempt_rows(db, queued.event_id)
    assert attempt["attempt"] == 1
    assert attempt["relay_id"] == relay_id
    assert attempt["status_code"] == 204
    assert attempt["outcome"] == "delivered"
    assert attempt["duration_ms"] >= 0


def test_a_row_recorded_with_a_line_break_in_its_tool_call_id_is_delivered_and_holds_nothing_back(
    database_url: str, db: Db
) -> None:
    # Recorded under the earlier id rule (or by the previous release during an upgrade): the header
    # carries the id percent-encoded, the body carries it as it is, and the next result follows.
    secret = new_secret()
    legacy = "call\r\nX-Injected: 1 é"
    first, second = queue_results(db, "conv-legacy-id", 2, tool_call_id=legacy)
    with Receiver([secret]) as agent, running_relay(relay_config(database_url, agent.url, [secret])):
        deliveries = agent.wait_for_accepted({first.event_id, second.event_id})
    by_id = {d.headers["webhook-id"]: d for d in deliveries}
    assert by_id[first.event_id].headers["idempotency-key"] == "call%0D%0AX-Injected:%201%20%C3%A9"
    assert "x-injected" not in by_id[first.event_id].headers
    assert by_id[first.event_id].payload["tool_call_id"] == legacy
    assert by_id[second.event_id].headers["idempotency-key"] == second.tool_call_id
    assert {row["status"] for row in outbox_rows(db).values()} == {"delivered"}

"""A conversation's results reach the Agent in commit order; a stuck conversation holds back only itself."""

from __future__ import annotations

from typing import Any

import psycopg

from harness.receiver import Delivery, Receiver, Reply, new_secret
from tests.support.outbox import outbox_rows, queue_results, relay_config, running_relay, wait_until

Db = psycopg.Connection[dict[str, Any]]


def first_accepted(agent: Receiver, conversation_id: str) -> list[Delivery]:
    seen: set[str] = set()
    ordered = []
    for delivery in agent.accepted():
        if delivery.payload["conversation_id"] == conversation_id and delivery.event_id not in seen:
            seen.add(delivery.event_id)
            ordered.append(delivery)
    return ordered


def test_order_per_conversation_holds_while_its_head_is_retried(database_url: str, db: Db) -> None:
    secret = new_secret()
    slow = queue_results(db, "conv-slow", 3)
    fast = queue_results(db, "conv-fast", 3)
    head = slow[0].event_id

    def responder(delivery: Delivery, earlier: int) -> Reply:
        if delivery.event_id == head and earlier < 2:
            return Reply(503, headers={"Retry-After": "1"} if earlier == 0 else {})
        return Reply()

    with (
        Receiver([secret], responder=responder) as agent,
        running_relay(relay_config(database_url, agent.url, [secret], backoff_max=2.0)),
    ):
        agent.wait_for_accepted({q.event_id for q in slow + fast})

    slow_order = first_accepted(agent, "conv-slow")
    assert [d.payload["sequence"] for d in slow_order] == [1, 2, 3]
    head_accepted = slow_order[0].arrived_at
    later_slow = [d for d in agent.snapshot() if d.event_id in {slow[1].event_id, slow[2].event_id}]
    assert all(d.arrived_at > head_accepted for d in later_slow), "a later result overtook its retried head"
    fast_order = first_accepted(agent, "conv-fast")
    assert [d.payload["sequence"] for d in fast_order] == [1, 2, 3]
    assert fast_order[-1].arrived_at < head_accepted, "the retried conversation held back another one"


def test_a_dead_row_holds_back_nothing(database_url: str, db: Db) -> None:
    secret = new_secret()
    queued = queue_results(db, "conv-dead-head", 3)

    def responder(delivery: Delivery, _earlier: int) -> Reply:
        return Reply(410) if delivery.event_id == queued[0].event_id else Reply()

    with (
        Receiver([secret], responder=responder) as agent,
        running_relay(relay_config(database_url, agent.url, [secret])),
    ):
        agent.wait_for_accepted({queued[1].event_id, queued[2].event_id})
        wait_until(lambda: sum(r["status"] == "delivered" for r in outbox_rows(db).values()) == 2)
    assert [d.payload["sequence"] for d in agent.snapshot()] == [1, 2, 3]
    assert [row["status"] for row in outbox_rows(db).values()] == ["dead", "delivered", "delivered"]

"""Failures are retried with backoff under the same webhook-id and body, or the row dies, as the contract says."""

from __future__ import annotations

from typing import Any

import psycopg

from harness.processes import free_port
from harness.receiver import Receiver, Reply, always, fail_first, new_secret
from tests.support.outbox import (
    attempt_rows,
    outbox_rows,
    queue_results,
    relay_config,
    running_relay,
    wait_until,
)

Db = psycopg.Connection[dict[str, Any]]


def settled(db: Db, event_id: str) -> dict[str, Any]:
    """The row once its outcome is recorded and no longer pending."""
    row: dict[str, Any] = wait_until(
        lambda: (
            (row := outbox_rows(db)[event_id])["status"] != "pending" and row["lease_owner"] is None and row
        )
    )
    return row


def test_failed_attempts_are_retried_with_the_same_webhook_id_and_body(database_url: str, db: Db) -> None:
    secret = new_secret()
    (queued,) = queue_results(db, "conv-retry")
    responder = fail_first(2, Reply(500, body=b"agent overloaded"))
    with (
        Receiver([secret], responder=responder) as agent,
        running_relay(relay_config(database_url, agent.url, [secret])),
    ):
        agent.wait_for_accepted({queued.event_id})
        row = settled(db, queued.event_id)
    requests = agent.snapshot()
    assert [d.reply.status for d in requests] == [500, 500, 204]
    assert {d.event_id for d in requests} == {queued.event_id}
    assert len({d.body for d in requests}) == 1
    assert all(d.verified_by == (0,) for d in requests)
    assert row["status"] == "delivered" and row["attempts"] == 3
    attempts = attempt_rows(db, queued.event_id)
    assert [(a["attempt"], a["status_code"], a["outcome"]) for a in attempts] == [
        (1, 500, "retry"),
        (2, 500, "retry"),
        (3, 204, "delivered"),
    ]
    assert attempts[0]["response_excerpt"] == "agent overloaded"


def test_a_client_error_kills_the_row_at_once(database_url: str, db: Db) -> None:
    secret = new_secret()
    (queued,) = queue_results(db, "conv-400")
    with (
        Receiver([secret], responder=always(400, body=b'{"error": "bad"}')) as agent,
        running_relay(relay_config(database_url, agent.url, [secret])),
    ):
        row = settled(db, queued.event_id)
    assert row["status"] == "dead" and row["attempts"] == 1
    assert row["last_error"] == 'HTTP 400: {"error": "bad"}'
    assert len(agent.snapshot()) == 1
    assert [a["outcome"] for a in attempt_rows(db, queued.event_id)] == ["dead"]


def test_a_row_is_dead_after_the_maximum_number_of_attempts(database_url: str, db: Db) -> None:
    secret = new_secret()
    (queued,) = queue_results(db, "conv-max")
    with (
        Receiver([secret], responder=always(503)) as agent,
        running_relay(relay_config(database_url, agent.url, [secret], max_attempts=3)),
    ):
        row = settled(db, queued.event_id)
    assert row["status"] == "dead" and row["attempts"] == 3
    assert len(agent.snapshot()) == 3
    assert [a["outcome"] for a in attempt_rows(db, queued.event_id)] == ["retry", "retry", "dead"]


def test_retry_after_is_honoured(database_url: str, db: Db) -> None:
    secret = new_secret()
    (queued,) = queue_results(db, "conv-429")
    responder = fail_first(1, Reply(429, headers={"Retry-After": "1"}))
    with (
        Receiver([secret], responder=responder) as agent,
        running_relay(relay_config(database_url, agent.url, [secret], backoff_max=5.0)),
    ):
        agent.wait_for_accepted({queued.event_id})
    first, second = agent.snapshot()
    assert first.reply.status == 429
    # The base backoff is 0.05 s; only Retry-After explains a full second.
    assert second.arrived_at - first.arrived_at >= 0.95


def test_a_timeout_is_retried(database_url: str, db: Db) -> None:
    secret = new_secret()
    (queued,) = queue_results(db, "conv-timeout")
    with (
        Receiver([secret], responder=fail_first(1, Reply(hang=1.5))) as agent,
        running_relay(relay_config(database_url, agent.url, [secret], timeout=0.3)),
    ):
        agent.wait_for_accepted({queued.event_id})
        settled(db, queued.event_id)
    first, second = attempt_rows(db, queued.event_id)
    assert (first["error_class"], first["status_code"], first["outcome"]) == ("Timeout", None, "retry")
    assert 250 <= first["duration_ms"] < 1500
    assert second["outcome"] == "delivered"


def test_a_refused_connection_is_retried_until_the_agent_listens(database_url: str, db: Db) -> None:
    secret = new_secret()
    (queued,) = queue_results(db, "conv-refused")
    port = free_port()
    url = f"http://127.0.0.1:{port}/webhooks/lineup"
    with running_relay(relay_config(database_url, url, [secret], max_attempts=50)):
        wait_until(lambda: len(attempt_rows(db, queued.event_id)) >= 2)
        with Receiver([secret], port=port) as agent:
            agent.wait_for_accepted({queued.event_id})
            settled(db, queued.event_id)
    attempts = attempt_rows(db, queued.event_id)
    assert attempts[0]["error_class"] == "ConnectError"
    assert attempts[0]["outcome"] == "retry"
    assert attempts[-1]["outcome"] == "delivered"


def test_a_redirect_is_not_followed_and_is_retried(database_url: str, db: Db) -> None:
    secret = new_secret()
    (queued,) = queue_results(db, "conv-302")
    elsewhere = f"http://127.0.0.1:{free_port()}/elsewhere"
    responder = fail_first(1, Reply(302, headers={"Location": elsewhere}))
    with (
        Receiver([secret], responder=responder) as agent,
        running_relay(relay_config(database_url, agent.url, [secret])),
    ):
        agent.wait_for_accepted({queued.event_id})
        settled(db, queued.event_id)
    assert [d.reply.status for d in agent.snapshot()] == [302, 204]
    first, second = attempt_rows(db, queued.event_id)
    assert (first["status_code"], first["outcome"]) == (302, "retry")
    assert second["outcome"] == "delivered"

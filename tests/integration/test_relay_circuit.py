"""The endpoint's circuit: when the Agent fails as a whole the relays stop sending row by row, one
probe at a time tests it, and once it answers the backlog goes at once; held rows spend nothing."""

from __future__ import annotations

import functools
import sys
import threading
import time
from typing import Any

import psycopg
import pytest

from harness.receiver import Receiver, Reply, always, new_secret
from tests.support import outbox
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

ENDPOINT = "SELECT * FROM delivery_endpoints WHERE endpoint = 'agent'"


@pytest.fixture(autouse=True, params=["statements", "per node"])
def circuit_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test runs with the relay's statements and with their per-node form (what a relay on
    a Citus worker runs: relay_claim_local, relay_take_probe_local, relay_close_local, …), which on
    one PostgreSQL works on the table itself."""
    if request.param == "per node":
        per_node = functools.partial(outbox.relay_config, on_node=True)
        monkeypatch.setattr(sys.modules[__name__], "relay_config", per_node)
    return str(request.param)


def endpoint(db: Db) -> dict[str, Any]:
    row = db.execute(ENDPOINT).fetchone()
    assert row is not None
    return row


def opened(db: Db) -> dict[str, Any]:
    row: dict[str, Any] = wait_until(lambda: (row := endpoint(db))["circuit"] != "closed" and row)
    return row


def test_an_endpoint_failing_as_a_whole_opens_the_circuit_and_held_rows_spend_no_attempts(
    database_url: str, db: Db
) -> None:
    secret = new_secret()
    queued = queue_across(db, conversations=20, per_conversation=2)
    with Receiver([secret], responder=always(503)) as agent:
        config = relay_config(
            database_url, agent.url, [secret], circuit_failures=4, circuit_probe_seconds=0.2, max_attempts=4
        )
        with running_relay(config):
            state = opened(db)
            at_open = len(agent.snapshot())
            time.sleep(1.0)  # five probe intervals
            during = len(agent.snapshot()) - at_open
            rows = outbox_rows(db)
    assert state["last_error"].startswith("HTTP 503")
    # While open, only probes reach the endpoint: one per probe interval, whatever the backlog.
    assert during <= 1.0 / 0.2 + 1
    # No row died: the attempts spent before the circuit opened stay below the maximum, and the
    # probes gave theirs back.
    assert all(row["status"] == "pending" for row in rows.values())
    assert max(row["attempts"] for row in rows.values()) < 4
    assert len(rows) == len(queued)


def test_once_a_probe_is_answered_the_circuit_closes_and_the_backlog_goes_at_once(
    database_url: str, db: Db
) -> None:
    secret = new_secret()
    with Receiver([secret], responder=always(503)) as agent:
        # Backoff that would keep each row away for a minute: only the circuit can bring them back.
        config = relay_config(
            database_url,
            agent.url,
            [secret],
            circuit_failures=3,
            circuit_probe_seconds=0.3,
            backoff_base=60.0,
            backoff_max=60.0,
            timeout=5.0,  # a slow answer on a busy machine must not send a row away for a minute
        )
        with running_relay(config):
            queued = queue_across(db, conversations=10, per_conversation=3)
            opened(db)
            agent.responder = always(204)
            recovered = time.monotonic()
            agent.wait_for_accepted({q.event_id for q in queued}, timeout=10)
            drained = time.monotonic() - recovered
            wait_until(lambda: all(r["status"] == "delivered" for r in outbox_rows(db).values()))
            state = endpoint(db)
    assert drained < 3.0  # one probe interval and the drain, not a minute of each row's backoff
    assert state["circuit"] == "closed" and state["next_probe_at"] is None and state["probe_owner"] is None
    assert state["last_probe_at"] is not None
    accepted = agent.accepted()
    assert len(accepted) == len({d.event_id for d in accepted}) == len(queued)
    # Order within each conversation is kept through the outage.
    for conversation in {q.conversation_id for q in queued}:
        sequences = [d.payload["sequence"] for d in accepted if d.payload["conversation_id"] == conversation]
        assert sequences == sorted(sequences)


def test_a_failed_probe_gives_its_attempt_back(database_url: str, db: Db) -> None:
    secret = new_secret()
    (queued,) = queue_results(db, "conv-alone")
    with Receiver([secret], responder=always(503)) as agent:
        config = relay_config(
            database_url, agent.url, [secret], circuit_failures=2, circuit_probe_seconds=0.2, max_attempts=3
        )
        with running_relay(config):
            opened(db)
            wait_until(lambda: len(agent.snapshot()) >= 6)
            # Between probes (a probe in flight holds its attempt until it is recorded).
            row = wait_until(lambda: (r := outbox_rows(db)[queued.event_id])["lease_owner"] is None and r)
    # Two failures opened the circuit; every probe since then was refunded: alive, not dead.
    assert row["status"] == "pending" and row["attempts"] == 2
    outcomes = [a["outcome"] for a in attempt_rows(db, queued.event_id)]
    assert len(outcomes) >= 5 and set(outcomes) == {"retry"}


def test_a_retry_after_holds_the_whole_endpoint_for_as_long_as_it_asks(database_url: str, db: Db) -> None:
    secret = new_secret()
    answers = iter([Reply(429, headers={"Retry-After": "1"})])
    with Receiver([secret], responder=lambda _d, _earlier: next(answers, Reply(204))) as agent:
        config = relay_config(database_url, agent.url, [secret], concurrency=1, backoff_max=5.0)
        with running_relay(config):
            queued = queue_across(db, conversations=5, per_conversation=1)
            agent.wait_for_accepted({q.event_id for q in queued}, timeout=15)
    arrivals = [d.arrived_at for d in agent.snapshot()]
    # The 429 said: nothing for 1 s (the least delta-seconds can ask). Nothing else was sent in that
    # time, by any row.
    assert arrivals[1] - arrivals[0] >= 0.95
    assert endpoint(db)["circuit"] == "closed"


def test_a_row_the_agent_rejects_dies_alone_and_the_circuit_stays_closed(database_url: str, db: Db) -> None:
    secret = new_secret()
    bad = queue_results(db, "conv-bad")
    good = queue_across(db, conversations=6, per_conversation=2)
    reject = {q.event_id for q in bad}
    responder = lambda d, _earlier: Reply(422) if d.event_id in reject else Reply(204)  # noqa: E731
    with (
        Receiver([secret], responder=responder) as agent,
        running_relay(relay_config(database_url, agent.url, [secret], circuit_failures=1)),
    ):
        agent.wait_for_accepted({q.event_id for q in good})
        wait_until(lambda: outbox_rows(db)[bad[0].event_id]["status"] == "dead")
    assert endpoint(db)["circuit"] == "closed"


def test_probes_go_one_at_a_time_across_relays(database_url: str, db: Db) -> None:
    secret = new_secret()
    queue_across(db, conversations=30, per_conversation=2)
    with Receiver([secret], responder=always(503)) as agent:
        configs = [
            relay_config(database_url, agent.url, [secret], circuit_failures=3, circuit_probe_seconds=0.25)
            for _ in range(3)
        ]
        with running_relay(configs[0]), running_relay(configs[1]), running_relay(configs[2]):
            opened(db)
            time.sleep(0.5)  # the requests in flight when it opened have failed by now (the timeout)
            settled = len(agent.snapshot())
            wait_until(lambda: len(agent.snapshot()) > settled)  # the first probe
            before = len(agent.snapshot())
            time.sleep(2.0)  # eight probe intervals
            probes = len(agent.snapshot()) - before
    assert 1 <= probes <= 2.0 / 0.25 + 1


def test_a_relay_that_stops_hands_its_probe_back(database_url: str, db: Db) -> None:
    secret = new_secret()
    queue_across(db, conversations=5, per_conversation=1)
    # The rows fail at once and open the circuit; once it is open every request (a probe) is answered
    # only after 4 s, longer than the shutdown grace (0.5 s): the probe is cut.
    slow = threading.Event()
    responder = lambda _d, _e: Reply(503, delay=4.0) if slow.is_set() else Reply(503)  # noqa: E731
    with Receiver([secret], responder=responder) as agent:
        config = relay_config(
            database_url,
            agent.url,
            [secret],
            circuit_failures=2,
            circuit_probe_seconds=0.2,
            timeout=5.0,
            shutdown_grace=0.5,
        )
        with running_relay(config) as run:
            opened(db)
            slow.set()
            sent = len(agent.snapshot())
            # A slow probe has reached the Agent and waits for its answer.
            wait_until(
                lambda: len(agent.snapshot()) > sent and endpoint(db)["probe_owner"] == config.relay_id
            )
            run.stop()  # while the probe waits for its answer
    state = endpoint(db)
    assert (state["circuit"], state["probe_owner"], state["probe_expires_at"]) == ("open", None, None)


def poison(conversation: str) -> Any:
    """An Agent that answers 500 for one conversation's results and 204 for every other."""
    return lambda d, _earlier: Reply(500) if d.payload["conversation_id"] == conversation else Reply(204)


def test_a_row_the_agent_keeps_failing_dies_after_max_attempts_even_as_the_probe(
    database_url: str, db: Db
) -> None:
    # The third security review: with nothing else pending, the one failing row was the probe at
    # every interval, each failed probe gave its attempt back, and it was re-sent forever.
    secret = new_secret()
    (bad,) = queue_results(db, "conv-poison")
    with Receiver([secret], responder=poison("conv-poison")) as agent:
        config = relay_config(
            database_url, agent.url, [secret], circuit_failures=3, circuit_probe_seconds=0.2, max_attempts=5
        )
        with running_relay(config):
            opened(db)
            row = wait_until(lambda: (r := outbox_rows(db)[bad.event_id])["status"] == "dead" and r)
            sent_while_pending = len(agent.snapshot())
            # Healthy results flow again: the next probe is one of them, and the circuit closes.
            good = queue_across(db, conversations=4, per_conversation=2, prefix="conv-healthy")
            agent.wait_for_accepted({q.event_id for q in good})
            state = wait_until(lambda: (e := endpoint(db))["circuit"] == "closed" and e)
    assert row["attempts"] == 5 and row["last_error"].startswith("HTTP 500")
    # max_attempts requests for the row, no more: its probes were its attempts.
    assert sent_while_pending == 5
    assert [d.event_id for d in agent.snapshot()].count(bad.event_id) == 5
    assert state["circuit"] == "closed"


def test_the_probe_prefers_a_row_that_has_not_failed(database_url: str, db: Db) -> None:
    secret = new_secret()
    (bad,) = queue_results(db, "conv-poison")
    with Receiver([secret], responder=poison("conv-poison")) as agent:
        config = relay_config(
            database_url,
            agent.url,
            [secret],
            circuit_failures=3,
            # Long enough to queue three rows before the first probe even on a loaded machine; each
            # later opening waits it too.
            circuit_probe_seconds=1.0,
            max_attempts=10,
            backoff_max=0.05,
        )
        with running_relay(config):
            opened(db)
            # Queued while the circuit is open: the oldest pending row is still the failing one.
            good = queue_across(db, conversations=3, per_conversation=1, prefix="conv-healthy")
            agent.wait_for_accepted({q.event_id for q in good})
            wait_until(lambda: outbox_rows(db)[bad.event_id]["status"] == "dead")
    sent = [d.event_id for d in agent.snapshot()]
    # Three failures opened the circuit; the probe after them was a healthy row, which closed it.
    assert sent[:3] == [bad.event_id] * 3
    assert sent[3] in {q.event_id for q in good}
    assert sent.count(bad.event_id) == 10

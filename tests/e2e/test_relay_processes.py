"""Real `python -m relay` processes against a real Postgres and a local Agent: crashes, cut connections,
SIGTERM, and several relays at once. At-least-once, never lost, repeats only under one webhook-id."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from harness.processes import ROOT, free_port, spawn, stop, wait_http
from harness.receiver import Delivery, Receiver, always, new_secret
from tests.support.outbox import outbox_rows, queue_across, wait_until

pytestmark = pytest.mark.e2e

Db = psycopg.Connection[dict[str, Any]]


class Relays:
    """Starts relay processes and makes sure none outlives the test."""

    def __init__(self, database_url: str, agent_url: str, secret: str, logs: Path) -> None:
        self.database_url = database_url
        self.agent_url = agent_url
        self.secret = secret
        self.logs = logs
        self.processes: list[subprocess.Popen[bytes]] = []

    def start(self, relay_id: str, **env: str) -> subprocess.Popen[bytes]:
        (process,) = self.start_all(relay_id, **env)
        return process

    def start_all(self, *relay_ids: str, **env: str) -> list[subprocess.Popen[bytes]]:
        """Relays started at once, each answering ``/readyz`` on a port of its own."""
        ports: list[int] = []
        for _ in relay_ids:
            port = free_port()
            while port in ports:
                port = free_port()
            ports.append(port)
        started = [
            self._spawn(relay_id, port, **env) for relay_id, port in zip(relay_ids, ports, strict=True)
        ]
        for process, port in zip(started, ports, strict=True):
            wait_http(f"http://127.0.0.1:{port}/readyz", process=process)
        return started

    def _spawn(self, relay_id: str, port: int, **env: str) -> subprocess.Popen[bytes]:
        settings = {
            "DATABASE_URL": self.database_url,
            "AGENT_WEBHOOK_URL": self.agent_url,
            "WEBHOOK_SECRET": self.secret,
            "RELAY_ID": relay_id,
            "RELAY_TIMEOUT_SECONDS": "0.5",
            "RELAY_LEASE_SECONDS": "2",
            "RELAY_BACKOFF_BASE_SECONDS": "0.05",
            "RELAY_BACKOFF_MAX_SECONDS": "0.2",
            "RELAY_POLL_INTERVAL_SECONDS": "0.2",
            "RELAY_CONCURRENCY": "4",
            "RELAY_BATCH_SIZE": "4",
            "RELAY_METRICS_HOST": "127.0.0.1",
            "RELAY_METRICS_PORT": str(port),
            **env,
        }
        process = spawn(["-m", "relay"], settings, self.logs / f"{relay_id}.log")
        self.processes.append(process)
        return process

    def log(self, relay_id: str) -> str:
        return (self.logs / f"{relay_id}.log").read_text(errors="replace")[-4000:]

    def close(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.kill()
                process.wait()


@pytest.fixture
def secret() -> str:
    return new_secret()


@pytest.fixture
def relays_for(database_url: str, secret: str, tmp_path: Path) -> Iterator[Any]:
    started: list[Relays] = []

    def make(agent: Receiver) -> Relays:
        relays = Relays(database_url, agent.url, secret, tmp_path)
        started.append(relays)
        return relays

    yield make
    for relays in started:
        relays.close()


def assert_repeats_share_id_and_body(deliveries: list[Delivery]) -> None:
    bodies: dict[str, set[bytes]] = defaultdict(set)
    for delivery in deliveries:
        assert delivery.verified_by == (0,), "a request without a valid signature"
        assert delivery.payload["event_id"] == delivery.event_id
        bodies[delivery.event_id].add(delivery.body)
    assert all(len(variants) == 1 for variants in bodies.values()), "one webhook-id carried two bodies"


def assert_commit_order_per_conversation(deliveries: list[Delivery]) -> None:
    first_seen: dict[str, list[int]] = defaultdict(list)
    seen: set[str] = set()
    for delivery in deliveries:
        if delivery.reply.accepted and delivery.event_id not in seen:
            seen.add(delivery.event_id)
            first_seen[delivery.payload["conversation_id"]].append(delivery.payload["sequence"])
    for conversation, sequences in first_seen.items():
        assert sequences == sorted(sequences), f"{conversation} delivered out of order: {sequences}"


def more_than(count: int) -> Callable[[list[Delivery]], bool]:
    return lambda deliveries: len(deliveries) > count


def no_leases(db: Db) -> bool:
    row = db.execute("SELECT count(*) AS n FROM outbox WHERE lease_owner IS NOT NULL").fetchone()
    return row == {"n": 0}


def test_a_relay_killed_mid_batch_loses_nothing_while_another_runs(
    database_url: str, db: Db, secret: str, relays_for: Any
) -> None:
    with Receiver([secret], responder=always(204, delay=0.1)) as agent:
        relays = relays_for(agent)
        doomed, _survivor = relays.start_all("relay-doomed", "relay-survivor")
        queued = queue_across(db, conversations=24, per_conversation=4)
        agent.wait_until(lambda deliveries: len(deliveries) >= 20)
        doomed.send_signal(signal.SIGKILL)
        doomed.wait()
        held = db.execute("SELECT count(*) AS n FROM outbox WHERE lease_owner = 'relay-doomed'").fetchone()
        assert held is not None and held["n"] > 0, "the killed relay held nothing in flight"

        agent.wait_for_accepted({q.event_id for q in queued}, timeout=30)
        wait_until(lambda: all(r["status"] == "delivered" for r in outbox_rows(db).values()), timeout=10)
    deliveries = agent.snapshot()
    assert {d.event_id for d in deliveries} == {q.event_id for q in queued}
    assert_repeats_share_id_and_body(deliveries)
    assert_commit_order_per_conversation(deliveries)
    assert no_leases(db)


def test_two_relays_in_a_crash_free_run_never_both_deliver_one_row(
    database_url: str, db: Db, secret: str, relays_for: Any
) -> None:
    with Receiver([secret], responder=always(204, delay=0.01)) as agent:
        relays = relays_for(agent)
        relays.start_all("relay-one", "relay-two")
        queued = queue_across(db, conversations=40, per_conversation=4)
        agent.wait_for_accepted({q.event_id for q in queued}, timeout=30)
        wait_until(lambda: all(r["status"] == "delivered" for r in outbox_rows(db).values()), timeout=10)
    deliveries = agent.snapshot()
    assert len(deliveries) == len(queued), "some row was delivered twice"
    assert_commit_order_per_conversation(deliveries)
    per_relay = db.execute(
        "SELECT relay_id, count(*) AS n, count(DISTINCT event_id) AS events FROM outbox_attempts GROUP BY relay_id"
    ).fetchall()
    assert sum(row["n"] for row in per_relay) == sum(row["events"] for row in per_relay) == len(queued)
    assert {row["relay_id"] for row in per_relay} == {"relay-one", "relay-two"}


def test_a_relay_whose_connections_are_terminated_reconnects_and_carries_on(
    database_url: str, db: Db, secret: str, relays_for: Any
) -> None:
    with Receiver([secret], responder=always(204, delay=0.05)) as agent:
        relays = relays_for(agent)
        relay = relays.start("relay-cut")
        queued = queue_across(db, conversations=20, per_conversation=4, prefix="before")
        terminated = 0
        for _ in range(3):
            agent.wait_until(more_than(len(agent.snapshot()) + 3))
            rows = db.execute(
                "SELECT pg_terminate_backend(pid) AS done FROM pg_stat_activity"
                " WHERE datname = current_database() AND application_name LIKE 'lineup-relay%%'"
            ).fetchall()
            terminated += sum(1 for row in rows if row["done"])
        assert terminated >= 3
        later = queue_across(db, conversations=5, per_conversation=2, prefix="after")
        agent.wait_for_accepted({q.event_id for q in queued + later}, timeout=30)
        wait_until(lambda: all(r["status"] == "delivered" for r in outbox_rows(db).values()), timeout=10)
        assert relay.poll() is None, relays.log("relay-cut")
        assert stop(relay) == 0, relays.log("relay-cut")
    assert_repeats_share_id_and_body(agent.snapshot())
    assert_commit_order_per_conversation(agent.snapshot())
    assert "relay_claim_failed" in relays.log("relay-cut") or "relay_record_failed" in relays.log("relay-cut")


def test_sigterm_exits_zero_and_leaves_no_row_leased(
    database_url: str, db: Db, secret: str, relays_for: Any
) -> None:
    with Receiver([secret], responder=always(204, delay=0.3)) as agent:
        relays = relays_for(agent)
        relay = relays.start("relay-term")
        queued = queue_across(db, conversations=20, per_conversation=1)
        agent.wait_until(lambda deliveries: len(deliveries) >= 4)
        started = time.monotonic()
        relay.send_signal(signal.SIGTERM)
        assert relay.wait(timeout=10) == 0, relays.log("relay-term")
        assert time.monotonic() - started < 5
    rows = outbox_rows(db)
    assert no_leases(db)
    sent = {d.event_id for d in agent.snapshot()}
    assert all(rows[event_id]["status"] == "delivered" for event_id in sent)
    assert len(rows) == len(queued)


def test_a_relay_with_a_bad_secret_refuses_to_start_naming_the_variable() -> None:
    env = {**os.environ, "DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none"}
    env.update(AGENT_WEBHOOK_URL="http://127.0.0.1:1/hook", WEBHOOK_SECRET="not-a-secret")
    done = subprocess.run(
        [sys.executable, "-m", "relay"], cwd=ROOT, env=env, capture_output=True, timeout=30, check=False
    )
    assert done.returncode == 2
    assert b"WEBHOOK_SECRET" in done.stderr
    assert b"not-a-secret" not in done.stderr

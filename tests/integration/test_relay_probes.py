"""The relay's own port: /healthz, /readyz, /metrics; and polling alone when LISTEN is unavailable."""

from __future__ import annotations

from typing import Any

import httpx
import psycopg

from harness.processes import free_port
from harness.receiver import Receiver, new_secret
from service.version import __version__
from tests.support.outbox import outbox_rows, queue_results, relay_config, running_relay, wait_until

Db = psycopg.Connection[dict[str, Any]]


def test_probes_report_health_readiness_and_outbox_metrics(database_url: str, db: Db) -> None:
    secret = new_secret()
    (queued,) = queue_results(db, "conv-metrics")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with (
        Receiver([secret]) as agent,
        running_relay(relay_config(database_url, agent.url, [secret], metrics_port=port)) as run,
    ):
        wait_until(lambda: run.relay.probe_port == port)
        wait_until(lambda: outbox_rows(db)[queued.event_id]["status"] == "delivered")
        health = httpx.get(f"{base}/healthz")
        ready = httpx.get(f"{base}/readyz")
        metrics = httpx.get(f"{base}/metrics")
        missing = httpx.get(f"{base}/nothing-here")
    assert (health.status_code, health.json()) == (200, {"status": "ok", "version": __version__})
    assert ready.status_code == 200, ready.text
    assert missing.status_code == 404
    assert metrics.status_code == 200
    assert metrics.headers["content-type"].startswith("text/plain")
    text = metrics.text
    # Delivered rows are counted by the counter below, never sampled from the table.
    assert 'lineup_outbox_rows{status="delivered"}' not in text
    assert 'lineup_outbox_rows{status="pending"} 0.0' in text
    assert 'lineup_delivery_paused{endpoint="agent"} 0.0' in text
    assert 'lineup_delivery_circuit_open{endpoint="agent"} 0.0' in text
    assert "lineup_outbox_oldest_pending_age_seconds 0.0" in text
    assert "lineup_outbox_dead_rows 0.0" in text
    assert 'lineup_relay_delivery_attempts_total{outcome="delivered"} 1.0' in text
    assert "lineup_relay_commit_to_delivery_seconds_count 1.0" in text
    assert "lineup_relay_delivery_attempt_seconds_count 1.0" in text
    # The relay's own pool (relay.database: 4 connections), counted by psycopg_pool.
    assert 'lineup_db_pool_max_connections{pool="lineup-relay"} 4.0' in text
    assert 'lineup_db_pool_checkouts_total{pool="lineup-relay"}' in text
    assert "lineup_event_loop_lag_seconds_count" in text


def test_readiness_fails_when_the_database_is_behind_the_migrations(database_url: str, db: Db) -> None:
    secret = new_secret()
    port = free_port()
    db.execute("UPDATE alembic_version SET version_num = '0001'")
    with running_relay(relay_config(database_url, "http://127.0.0.1:9/", [secret], metrics_port=port)) as run:
        wait_until(lambda: run.relay.probe_port == port)
        ready = httpx.get(f"http://127.0.0.1:{port}/readyz")
    assert ready.status_code == 503
    assert "0001" in ready.text


def test_a_poll_only_relay_delivers_without_listening(database_url: str, db: Db) -> None:
    secret = new_secret()
    with (
        Receiver([secret]) as agent,
        running_relay(relay_config(database_url, agent.url, [secret], poll_only=True, poll_interval=0.1)),
    ):
        queued = queue_results(db, "conv-poll", 2)
        agent.wait_for_accepted({q.event_id for q in queued})
        listeners = db.execute(
            "SELECT count(*) AS n FROM pg_stat_activity"
            " WHERE datname = current_database() AND application_name = 'lineup-relay-listen'"
        ).fetchone()
    assert listeners == {"n": 0}

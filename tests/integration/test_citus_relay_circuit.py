"""On Citus, the endpoint's circuit works as on one primary: a relay per worker, the Agent down, the
circuit opens once for the cluster, one probe at a time tests it, and once a probe is answered it
closes and every held row of every worker goes, none lost, none twice.

A real Citus cluster (a coordinator and two workers) started here, migrated and distributed as
``make citus`` does; skipped where no citus extension is installed (``make citus`` builds one).
Each relay connects to a worker (its claims, probe and close run on that worker's shards:
``service/db/sql/80_relay_nodes.sql``) and LISTENs on the coordinator.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from harness.citus import citus_cluster, installed
from harness.postgres import memory_dir
from harness.receiver import Receiver, always, new_secret
from service.db.distribute import distribute
from service.db.migrate import upgrade
from service.manifests import registry_of
from service.settings import Settings
from tests.support.outbox import outbox_rows, queue_across, relay_config, running_relay, wait_until

pytestmark = pytest.mark.skipif(
    not installed(), reason="no citus extension installed (make citus builds one)"
)

Db = psycopg.Connection[dict[str, Any]]
PROBE_SECONDS = 0.5


@pytest.fixture(scope="module")
def cluster_urls() -> Iterator[tuple[str, list[str]]]:
    with citus_cluster(workers=2, parent=memory_dir()) as cluster:
        url = cluster.url()
        upgrade(url, registry_of(Settings()))
        with psycopg.connect(url, autocommit=True) as conn:
            distribute(conn)
        yield url, [cluster.url(worker) for worker in cluster.workers]


def endpoint(db: Db) -> dict[str, Any]:
    row = db.execute("SELECT * FROM delivery_endpoints WHERE endpoint = 'agent'").fetchone()
    assert row is not None
    return row


def all_delivered(db: Db) -> dict[str, dict[str, Any]] | None:
    rows = outbox_rows(db)
    return rows if all(row["status"] == "delivered" for row in rows.values()) else None


def test_an_outage_opens_the_circuit_once_probes_one_at_a_time_closes_and_loses_nothing(
    cluster_urls: tuple[str, list[str]],
) -> None:
    coordinator, workers = cluster_urls
    secret = new_secret()
    with psycopg.connect(coordinator, autocommit=True, row_factory=dict_row) as db:
        queued = queue_across(db, conversations=16, per_conversation=3)
        placed = db.execute(
            "SELECT count(DISTINCT nodeport) AS n FROM citus_shards"
            " WHERE table_name = 'outbox'::regclass AND shardid IN ("
            "     SELECT get_shard_id_for_distribution_column('outbox', c) FROM unnest(%s::text[]) c)",
            (sorted({q.conversation_id for q in queued}),),
        ).fetchone()
        assert placed is not None and placed["n"] == 2  # both workers hold results to deliver
        with Receiver([secret], responder=always(503)) as agent:
            configs = [
                relay_config(
                    worker,
                    agent.url,
                    [secret],
                    listen_url=coordinator,
                    circuit_failures=3,
                    circuit_probe_seconds=PROBE_SECONDS,
                    backoff_base=60.0,  # each row's own retry a minute away: only the close brings it back
                    backoff_max=60.0,
                    max_attempts=5,
                    timeout=5.0,
                )
                for worker in workers
            ]
            with running_relay(configs[0]) as first, running_relay(configs[1]) as second:
                state = wait_until(lambda: (e := endpoint(db))["circuit"] != "closed" and e)
                time.sleep(1.0)  # what was in flight when it opened has failed by now
                before = len(agent.snapshot())
                watched = time.monotonic()
                owners: set[str] = set()
                while time.monotonic() - watched < 3.0:
                    owner = endpoint(db)["probe_owner"]
                    if owner is not None:
                        owners.add(owner)
                    time.sleep(0.05)
                probes = len(agent.snapshot()) - before
                held = outbox_rows(db)
                agent.responder = always(204)
                recovered = time.monotonic()
                agent.wait_for_accepted({q.event_id for q in queued}, timeout=20)
                drained = time.monotonic() - recovered
                rows = wait_until(lambda: all_delivered(db))
                closed = endpoint(db)
                assert first.relay.config.on_node and second.relay.config.on_node
    assert state["last_error"].startswith("HTTP 503")
    # While open, only probes reached the Agent, one per interval for the whole cluster.
    assert 1 <= probes <= 3.0 / PROBE_SECONDS + 1
    assert owners <= {c.relay_id for c in configs}
    # Held rows spent no attempts: none died, none near max_attempts.
    assert all(row["status"] == "pending" for row in held.values())
    assert max(row["attempts"] for row in held.values()) < 5
    # Closed by a probe, every worker's held rows made due at once: seconds, not the minute of backoff.
    assert drained < 10.0
    assert closed["circuit"] == "closed" and closed["probe_owner"] is None and closed["next_probe_at"] is None
    # Nothing lost, nothing twice, each conversation in order.
    accepted = agent.accepted()
    assert len(rows) == len(queued)
    assert sorted(str(d.event_id) for d in accepted) == sorted(q.event_id for q in queued)
    for conversation in {q.conversation_id for q in queued}:
        sequences = [d.payload["sequence"] for d in accepted if d.payload["conversation_id"] == conversation]
        assert sequences == sorted(sequences)

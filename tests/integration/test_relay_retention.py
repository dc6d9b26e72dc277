"""Retention prunes delivered rows (and their attempts) after RELAY_RETENTION_DAYS; never dead or pending ones."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from relay.retention import Retention, prune_delivered, prune_on_node
from tests.support.outbox import attempt_rows, outbox_rows, queue_results

Db = psycopg.Connection[dict[str, Any]]

AGE = """
UPDATE outbox SET status = %(status)s, created_at = now() - make_interval(days => %(days)s),
       delivered_at = CASE WHEN %(status)s = 'delivered' THEN now() - make_interval(days => %(days)s) END,
       attempts = 1
WHERE event_id = %(event_id)s
"""
ATTEMPT = """
INSERT INTO outbox_attempts (event_id, conversation_id, attempt, relay_id, started_at, duration_ms, status_code,
                             outcome)
SELECT o.event_id, o.conversation_id, 1, 'relay-old', now() - interval '8 days', 5, 204, 'delivered'
FROM outbox o WHERE o.event_id = %s
"""


@pytest.mark.parametrize("per_node", [False, True], ids=["statements", "per node"])
async def test_old_delivered_rows_and_their_attempts_go_and_nothing_else_does(
    database_url: str, db: Db, per_node: bool
) -> None:
    """Per node: what a relay on a Citus worker runs (relay_prune_local, shard by shard), which on one
    PostgreSQL prunes the table itself."""
    old_delivered = queue_results(db, "conv-old", 7)
    recent_delivered, old_dead, old_pending = queue_results(db, "conv-keep", 3)
    for queued in old_delivered:
        db.execute(AGE, {"status": "delivered", "days": 8, "event_id": queued.event_id})
        db.execute(ATTEMPT, (queued.event_id,))
    db.execute(AGE, {"status": "delivered", "days": 6, "event_id": recent_delivered.event_id})
    db.execute(AGE, {"status": "dead", "days": 400, "event_id": old_dead.event_id})
    db.execute(AGE, {"status": "pending", "days": 400, "event_id": old_pending.event_id})

    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        if per_node:
            pruned = (await prune_on_node(conn, Retention(7, 0, "relay-x"), batch=3, pause=0))["delivered"]
        else:
            pruned = await prune_delivered(conn, 7, batch=3, pause=0)

    assert pruned == 7
    assert set(outbox_rows(db)) == {recent_delivered.event_id, old_dead.event_id, old_pending.event_id}
    assert all(attempt_rows(db, q.event_id) == [] for q in old_delivered)
    assert db.execute("SELECT count(*) AS n FROM outbox_attempts").fetchone() == {"n": 0}

"""The outbox gauges cost the backlog, never the delivered history: one sample reads the pending and
dead rows through their indexes and not one delivered row (the bench at ten million rows is
the one-off gauge_cost, bench/README.md; here the pages read are counted, which no load on the machine moves)."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from prometheus_client import CollectorRegistry

from service.db import gauges
from service.outbox_gauges import OutboxGauges

HISTORY = """
INSERT INTO outbox (event_id, tool, tool_call_id, conversation_id, sequence, status, attempts,
                    created_at, delivered_at, payload)
SELECT gen_random_uuid(), 'pomodoro.start', 'h-' || n, 'h-' || (n / 100), n % 100 + 1, 'delivered', 1,
       now() - make_interval(secs => 86400 + n), now() - make_interval(secs => 86400 + n),
       '{"type": "tool.result"}'::jsonb
FROM generate_series(1, 30000) AS n
"""

BACKLOG = """
INSERT INTO outbox (event_id, tool, tool_call_id, conversation_id, sequence, status, attempts, payload)
SELECT gen_random_uuid(), 'pomodoro.start', %(status)s || n, %(status)s || n, 1, %(status)s, 1, '{}'::jsonb
FROM generate_series(1, %(count)s) AS n
"""


def pages_read(db: Any, statement: str) -> int:
    plan = db.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + statement).fetchone()
    top = next(iter(plan.values()))[0]["Plan"]
    return int(top.get("Shared Hit Blocks", 0)) + int(top.get("Shared Read Blocks", 0))


@pytest.fixture
def history(db: Any) -> None:
    db.execute(HISTORY)
    db.execute(BACKLOG, {"status": "pending", "count": 12})
    db.execute(BACKLOG, {"status": "dead", "count": 3})
    db.execute("VACUUM ANALYZE outbox")


async def test_a_sample_counts_the_backlog(database_url: str, history: None) -> None:
    sampled = OutboxGauges(CollectorRegistry())
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        backlog = await sampled.sample(conn)
    assert (backlog.pending, backlog.dead) == (12, 3)
    assert sampled.rows.labels("pending")._value.get() == 12
    assert sampled.circuit_open.labels("agent")._value.get() == 0


def test_a_sample_reads_a_few_pages_whatever_the_delivered_history(db: Any, history: None) -> None:
    every_delivered_row = pages_read(db, "SELECT count(*) FROM outbox WHERE status = 'delivered'")
    sample = pages_read(db, gauges.OUTBOX_BACKLOG) + pages_read(db, gauges.DELIVERY_STATE)
    assert every_delivered_row > 200  # the history is big enough for the comparison to mean something
    assert sample <= 20

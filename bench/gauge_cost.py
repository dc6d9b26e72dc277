"""What one sample of the outbox gauges costs as the delivered history grows, against the query the
gauges ran before (it counted every row by status), in one run against a throwaway database.

    .venv/bin/python -m bench.gauge_cost [--steps 0,1000000,10000000] [--pending 2000] [--dead 200]
                                         [--samples 50]

The delivered history is inserted with plain SQL in steps (rows a week old, as retention keeps
them; small payloads), then VACUUM ANALYZE as autovacuum would leave it. At each step, with a
backlog of ``--pending`` pending and ``--dead`` dead rows in place:

* **sample**: the two statements every process runs per sample (``service.db.gauges``: the backlog,
  the delivery state), on one connection, ``--samples`` times: median and p95 wall time, and the
  buffers one sample touches (EXPLAIN ANALYZE, BUFFERS) — a figure the machine's noise cannot move;
* **stats**: the outbox statement of ``ops stats`` and the console's overview (the same bounded
  counts, delivered from the relays' tally);
* **before**: the query the gauges ran before (``count(*)`` of every row by status), a few times.

The bench exits 1 when a sample's counts differ from the rows inserted (a correctness check), not
when a figure misses its aim (one sample ≤ 10 ms at 10 million delivered rows).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import psycopg

from bench.common import percentile
from harness.database import throwaway_database
from service.db import gauges
from service.db.ops_queries import STATS_OUTBOX

# The gauges' query before issue 20, kept here as the baseline.
BEFORE = """
SELECT s.status, count(o.event_id)::bigint AS rows,
       coalesce(EXTRACT(EPOCH FROM now() - min(o.created_at)), 0)::float8 AS oldest_age_seconds
FROM (VALUES ('pending'), ('delivered'), ('dead')) AS s(status)
LEFT JOIN outbox o ON o.status = s.status
GROUP BY s.status
"""

# ``count`` delivered rows, a week old, in conversations of 100; numbered from ``first``.
HISTORY = """
INSERT INTO outbox (event_id, tool, tool_call_id, conversation_id, sequence, status, attempts,
                    next_attempt_at, created_at, delivered_at, payload)
SELECT gen_random_uuid(), 'pomodoro.start', 'h-' || n, 'h-' || (n / 100), n %% 100 + 1, 'delivered', 1,
       t, t, t + interval '50 milliseconds', '{"type": "tool.result"}'::jsonb
FROM generate_series(%(first)s::bigint, %(first)s::bigint + %(count)s - 1) AS n,
     LATERAL (SELECT now() - interval '7 days' + make_interval(secs => n %% 600000) AS t) AS at
"""

BACKLOG = """
INSERT INTO outbox (event_id, tool, tool_call_id, conversation_id, sequence, status, attempts,
                    next_attempt_at, created_at, last_error, payload)
SELECT gen_random_uuid(), 'pomodoro.start', %(status)s || '-' || n, %(status)s || '-' || n, 1, %(status)s,
       3, now() + interval '1 minute', now() - make_interval(secs => n), 'HTTP 503', '{}'::jsonb
FROM generate_series(1, %(count)s) AS n
"""

TALLY = """
INSERT INTO outbox_tallies (shard, delivered) VALUES (0, %(delivered)s)
ON CONFLICT (shard) DO UPDATE SET delivered = excluded.delivered
"""

SAMPLE = (gauges.OUTBOX_BACKLOG, gauges.DELIVERY_STATE)


Conn = psycopg.Connection[tuple[object, ...]]


def timed(conn: Conn, statements: tuple[str, ...], times: int) -> list[float]:
    spent = []
    for _ in range(times):
        started = time.perf_counter()
        for statement in statements:
            conn.execute(statement).fetchall()
        spent.append((time.perf_counter() - started) * 1000)
    return spent


def buffers(conn: Conn, statements: tuple[str, ...]) -> int:
    """Shared buffers (hit + read) the statements touch: their plans' top nodes, which count their
    subplans' too."""
    total = 0
    for statement in statements:
        plan = conn.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + statement).fetchone()
        assert plan is not None
        top = plan[0][0]["Plan"]  # type: ignore[index]
        total += int(top.get("Shared Hit Blocks", 0)) + int(top.get("Shared Read Blocks", 0))
    return total


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", default="0,1000000,10000000", help="delivered rows at each step")
    parser.add_argument("--pending", type=int, default=2000)
    parser.add_argument("--dead", type=int, default=200)
    parser.add_argument("--samples", type=int, default=50)
    parser.add_argument("--before-samples", type=int, default=3)
    args = parser.parse_args()
    steps = [int(n) for n in args.steps.split(",")]
    failed = False
    with throwaway_database("gauges") as url, psycopg.connect(url, autocommit=True) as conn:
        for status, count in (("pending", args.pending), ("dead", args.dead)):
            conn.execute(BACKLOG, {"status": status, "count": count})
        inserted = 0
        print(f"backlog: {args.pending} pending, {args.dead} dead rows", flush=True)
        print(
            f"{'delivered rows':>15} | {'sample p50':>10} {'p95':>8} {'buffers':>8} | {'stats p50':>9} "
            f"{'buffers':>8} | {'before p50':>10} {'buffers':>8} | before / sample",
            flush=True,
        )
        for step in steps:
            started = time.perf_counter()
            while inserted < step:
                chunk = min(1_000_000, step - inserted)
                conn.execute(HISTORY, {"first": inserted, "count": chunk})
                inserted += chunk
            conn.execute(TALLY, {"delivered": inserted})
            conn.execute("VACUUM ANALYZE outbox")
            loaded = time.perf_counter() - started
            found = conn.execute(gauges.OUTBOX_BACKLOG).fetchone()
            if found is None or (found[0], found[1]) != (args.pending, args.dead):
                print(f"error: the sample counted {found}, expected {args.pending} pending, {args.dead} dead")
                failed = True
            timed(conn, SAMPLE, 5)  # warm
            sample = timed(conn, SAMPLE, args.samples)
            stats = timed(conn, (STATS_OUTBOX,), args.samples)
            before = timed(conn, (BEFORE,), args.before_samples)
            ratio = statistics.median(before) / statistics.median(sample)
            stats_buffers = buffers(conn, (STATS_OUTBOX,))
            print(
                f"{step:>15,} | {statistics.median(sample):>8.2f}ms {percentile(sample, 95):>6.2f}ms "
                f"{buffers(conn, SAMPLE):>8} | {statistics.median(stats):>7.2f}ms {stats_buffers:>8}"
                f" | {statistics.median(before):>8.1f}ms {buffers(conn, (BEFORE,)):>8} | {ratio:,.0f}x"
                f"   (loaded in {loaded:.0f} s)",
                flush=True,
            )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""Deadline lateness: 1,000 Pomodoros falling due within one second, beside 10,000 still focusing.

    .venv/bin/python -m bench.deadline_lateness [--due 1000] [--focusing 10000] [--lead 3]
                                                [--window 1] [--insert-first]

In a fresh database it inserts, with plain SQL, --focusing focusing operations whose ends_at is
hours away, starts ``python -m service serve`` and, once it is ready, inserts --due more whose
ends_at are spread evenly over --window seconds starting --lead seconds from now, each with its
workspace (the instance in the foreground), open app instance, sub-session and snapshot. Rows
inserted behind the service's back are found by the sweeper's poll (every SWEEPER_POLL_SECONDS,
1 s by default), so --lead must exceed it; a start accepted by the service wakes its own sweeper
at once. (--insert-first inserts them before starting the service; its start-up must then fit in
--lead.) The service's deadline sweeper settles them (SWEEPER_CLAIMERS claimers side by side, one
``settle_due`` statement per batch); the bench waits until all --due are settled and prints the
lateness (finalized_at - ends_at) p50/p99/max, how the sweeper batched them, the exactly-once
checks, the EXPLAIN (ANALYZE, BUFFERS) plan of the claim inside ``settle_due`` and the cost of
settling one batch, both in a transaction that is rolled back.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row

from bench.common import canonical_text, percentile
from harness.database import named_server, throwaway_database
from harness.processes import running_service
from service.settings import Settings

INDEX = "ix_operations_focusing_ends_at"

# One temp table of ids and times, then one INSERT ... SELECT per table: 11,000 Pomodoros in about
# a second. %(prefix)s names the conversations ('far-' or 'due-'); %(ends_at)s is an expression
# of g (1..count) and the statement's clock.
SEED = """
CREATE TEMP TABLE seed ON COMMIT DROP AS
SELECT g AS n,
       %(prefix)s::text || g AS conversation_id,
       gen_random_uuid() AS instance_id,
       gen_random_uuid() AS sub_session_id,
       gen_random_uuid() AS operation_id,
       %(duration)s::integer AS duration_seconds,
       {ends_at} AS ends_at
FROM generate_series(1, %(count)s) AS g;
INSERT INTO workspaces (conversation_id) SELECT conversation_id FROM seed;
INSERT INTO app_instances (instance_id, conversation_id, app_scope, opened_at)
SELECT instance_id, conversation_id, 'pomodoro', ends_at - make_interval(secs => duration_seconds)
FROM seed;
INSERT INTO sub_sessions (sub_session_id, instance_id, conversation_id, started_at)
SELECT sub_session_id, instance_id, conversation_id, ends_at - make_interval(secs => duration_seconds)
FROM seed;
INSERT INTO instance_states (instance_id, app_scope, schema_version)
SELECT instance_id, 'pomodoro', 1 FROM seed;
INSERT INTO operations (operation_id, tool, tool_call_id, conversation_id, app_scope, instance_id,
                        duration_seconds, activity, started_at, ends_at)
SELECT operation_id, 'pomodoro.start', 'seed-' || conversation_id, conversation_id, 'pomodoro', instance_id,
       duration_seconds, 'lateness bench', ends_at - make_interval(secs => duration_seconds), ends_at
FROM seed;
UPDATE workspaces w SET foreground_instance_id = s.instance_id FROM seed s
WHERE w.conversation_id = s.conversation_id;
"""

# Hours away: between one and two hours from now.
FAR_ENDS_AT = "statement_timestamp() + make_interval(secs => 3600 + (g * 3600.0) / %(count)s)"
# Spread evenly over [now + lead, now + lead + window).
DUE_ENDS_AT = (
    "date_trunc('milliseconds', statement_timestamp()) "
    "+ make_interval(secs => %(lead)s + %(window)s * (g - 1) / %(count)s)"
)

RESULTS = """
SELECT o.lateness_ms,
       EXTRACT(EPOCH FROM o.finalized_at - o.ends_at) * 1000 AS late_ms,
       o.state, o.reason, o.finalized_at, o.ends_at,
       (SELECT count(*) FROM outbox x WHERE x.operation_id = o.operation_id) AS outbox_rows,
       i.status AS instance_status, ss.status AS sub_session_status, st.readonly,
       w.foreground_instance_id IS NULL AS foreground_cleared
FROM operations o
JOIN app_instances i USING (instance_id)
JOIN sub_sessions ss USING (instance_id)
JOIN instance_states st USING (instance_id)
JOIN workspaces w ON w.conversation_id = o.conversation_id
WHERE o.conversation_id LIKE 'due-%'
ORDER BY o.ends_at
"""


def _sweeper_default(name: str) -> Any:
    return Settings.model_fields[name].default


def _claim_due() -> str:
    """The claim inside ``settle_due`` (service/db/sql/70_settle.sql), with its LIMIT as a parameter."""
    text = canonical_text("settle_due")
    claim = text[text.index("ARRAY(") + len("ARRAY(") : text.index("), 'completed'")]
    return claim.replace("p_limit", "%(limit)s")


CLAIM_DUE = _claim_due()
SETTLE_DUE = "SELECT * FROM settle_due(%(limit)s)"


def seed(url: str, prefix: str, count: int, ends_at: str, duration: int, **params: float) -> None:
    """Insert ``count`` focusing Pomodoros in one transaction."""
    statement = SEED.format(ends_at=ends_at)
    with psycopg.connect(url, cursor_factory=psycopg.ClientCursor) as conn:
        conn.execute(statement.encode(), {"prefix": prefix, "count": count, "duration": duration, **params})


def settled_count(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM operations WHERE conversation_id LIKE 'due-%' AND state <> 'focusing'"
        ).fetchone()
    return int(row[0]) if row else 0


def explain_claim(url: str, limit: int, overdue: int) -> tuple[list[str], list[str], list[str]]:
    """The claim's plan as the sweeper sees it now, and with ``overdue`` rows already due; then the
    plan of settling one batch (``settle_due``), all in one transaction rolled back."""
    statement = "EXPLAIN (ANALYZE, BUFFERS) " + CLAIM_DUE
    with psycopg.connect(url, cursor_factory=psycopg.ClientCursor) as conn:
        idle = [r[0] for r in conn.execute(statement, {"limit": limit}).fetchall()]
        seed_sql = SEED.format(
            ends_at="statement_timestamp() - make_interval(secs => 60 + g / 100.0)"
        ).replace("ON COMMIT DROP", "")
        conn.execute(seed_sql.encode(), {"prefix": "overdue-", "count": overdue, "duration": 1500})
        conn.execute("ANALYZE operations")
        busy = [r[0] for r in conn.execute(statement, {"limit": limit}).fetchall()]
        settle = [
            r[0]
            for r in conn.execute("EXPLAIN (ANALYZE, BUFFERS) " + SETTLE_DUE, {"limit": limit}).fetchall()
        ]
        conn.rollback()
    return idle, busy, settle


def _ms(value: float) -> str:
    return f"{value:.1f} ms"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--due", type=int, default=1000, help="operations falling due in the window")
    parser.add_argument("--focusing", type=int, default=10000, help="operations due hours later")
    parser.add_argument("--lead", type=float, default=3.0, help="seconds from insert to first deadline")
    parser.add_argument("--window", type=float, default=1.0, help="the due deadlines spread over this")
    parser.add_argument("--timeout", type=float, default=60.0, help="give up waiting after this")
    parser.add_argument(
        "--insert-first",
        action="store_true",
        help="insert the due rows before starting the service (its start-up must then fit in --lead; "
        "by default the service is started, ready, before the due rows go in)",
    )
    args = parser.parse_args(argv)
    if not (
        1 <= args.due <= 100_000
        and 0 <= args.focusing <= 1_000_000
        and 0.5 <= args.lead <= 60
        and 0 < args.window <= 60
    ):
        parser.error("keep it bounded")

    batch_size = _sweeper_default("sweeper_batch_size")
    print(
        f"deadline_lateness: server {named_server().rsplit('@', 1)[-1]}, {os.cpu_count()} cores, "
        f"load average {os.getloadavg()[0]:.2f} at start, {time.strftime('%Y-%m-%d %H:%M:%S')}"
    )
    print(
        f"    {args.due} due within {args.window:g} s starting {args.lead:g} s after the insert, "
        f"{args.focusing} focusing hours away; sweeper: {_sweeper_default('sweeper_claimers')} claimers, "
        f"batches of {batch_size}, poll every {_sweeper_default('sweeper_poll_seconds')} s"
    )
    ok = True
    with tempfile.TemporaryDirectory(prefix="bench-lateness-") as tmp, throwaway_database("lateness") as url:
        began = time.monotonic()
        seed(url, "far-", args.focusing, FAR_ENDS_AT, 7200)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("ANALYZE")
        seeded_far = time.monotonic() - began
        print(f"    seeded {args.focusing} focusing in {seeded_far:.1f} s")
        with contextlib.ExitStack() as stack:
            if not args.insert_first:
                stack.enter_context(running_service(url, Path(tmp)))
            began = time.monotonic()
            seed(url, "due-", args.due, DUE_ENDS_AT, 1500, lead=args.lead, window=args.window)
            inserted = time.monotonic()
            print(
                f"    seeded {args.due} due in {inserted - began:.2f} s"
                + ("" if args.insert_first else " (the service already running)")
            )
            if args.insert_first:
                stack.enter_context(running_service(url, Path(tmp)))
                ready_after = time.monotonic() - began
                print(
                    f"    service ready {ready_after:.2f} s after the insert began (first deadline at "
                    f"{args.lead:g} s)"
                )
                if ready_after >= args.lead - 0.2:
                    ok = False
                    print(
                        "    INVALID RUN: the service was not ready before the first deadline, so this "
                        "measures its start-up; use a larger --lead or leave out --insert-first"
                    )
            # The deadlines were computed from the insert statement's clock, just after `began`.
            time.sleep(max(0.0, began + args.lead + args.window - time.monotonic()))
            deadline = time.monotonic() + args.timeout
            settled = settled_count(url)
            while settled < args.due and time.monotonic() < deadline:
                time.sleep(0.1)
                settled = settled_count(url)
            with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
                rows = conn.execute(RESULTS).fetchall()
                far_row = conn.execute(
                    "SELECT count(*) AS n FROM operations WHERE conversation_id LIKE 'far-%' "
                    "AND state = 'focusing'"
                ).fetchone()
            far_focusing = int(far_row["n"]) if far_row else 0
        idle_plan, busy_plan, settle_plan = explain_claim(url, batch_size, args.due)

    completed = [r for r in rows if r["state"] == "completed" and r["reason"] == "deadline_reached"]
    lateness_ms = [float(r["lateness_ms"]) for r in completed if r["lateness_ms"] is not None]
    late_exact = [float(r["late_ms"]) for r in completed]
    once = sum(1 for r in rows if r["outbox_rows"] == 1)
    tidy = sum(
        1
        for r in rows
        if r["instance_status"] == "closed"
        and r["sub_session_status"] == "ended"
        and r["readonly"]
        and r["foreground_cleared"]
    )
    batches: dict[Any, int] = {}
    for r in completed:
        batches[r["finalized_at"]] = batches.get(r["finalized_at"], 0) + 1
    moments = sorted(batches)
    gaps = [(b - a).total_seconds() * 1000 for a, b in itertools.pairwise(moments)]
    sizes = [batches[m] for m in moments]

    span = (
        (max(r["finalized_at"] for r in completed) - min(r["ends_at"] for r in completed)).total_seconds()
        if completed
        else float("nan")
    )
    print(
        f"\nsettled {len(completed)} of {args.due} as completed/deadline_reached "
        f"(the last {span:.3f} s after the first deadline)"
    )
    print(
        f"    lateness_ms column          p50 {_ms(percentile(lateness_ms, 50))}   "
        f"p99 {_ms(percentile(lateness_ms, 99))}   max {_ms(max(lateness_ms, default=float('nan')))}"
    )
    print(
        f"    finalized_at - ends_at      p50 {_ms(percentile(late_exact, 50))}   "
        f"p99 {_ms(percentile(late_exact, 99))}   max {_ms(max(late_exact, default=float('nan')))}"
    )
    aim = 20 if args.due <= 1000 and args.focusing <= 10000 else 100
    print(f"    aim: p99 under {aim} ms -> {'met' if percentile(late_exact, 99) <= aim else 'MISSED'}")
    print(
        f"    sweeps (settle statements)  {len(moments)}; rows per sweep p50 {percentile(sizes, 50):.0f} "
        f"max {max(sizes, default=0)}; gap between sweeps p50 {_ms(percentile(gaps, 50))} "
        f"max {_ms(max(gaps, default=0.0))}"
    )
    print(
        f"    exactly once                {once} of {len(rows)} have one outbox row; {tidy} closed their "
        f"instance, sub-session, snapshot and foreground; {far_focusing} of {args.focusing} far "
        f"ones still focusing"
    )
    if len(completed) != args.due or once != args.due or tidy != args.due or far_focusing != args.focusing:
        ok = False
        print("    FAILED: not every due operation was settled exactly once, or a far one was touched")

    uses_index = any(INDEX in line for line in busy_plan) and not any(
        "Seq Scan on operations" in line for line in busy_plan
    )
    print(f"\nclaim query plan (CLAIM_DUE, LIMIT {batch_size}), {args.focusing} focusing, nothing due:")
    for line in idle_plan:
        print(f"    {line}")
    print(f"\nthe same with {args.due} overdue rows inserted (transaction rolled back):")
    for line in busy_plan:
        print(f"    {line}")
    key = next((line.strip() for line in busy_plan if INDEX in line), "(index not used)")
    print(f"\n    key line: {key}")
    print(f"    uses {INDEX}, no scan of every focusing row: {'yes' if uses_index else 'NO'}")
    ok = ok and uses_index

    print(f"\nsettling one batch of {batch_size} (EXPLAIN ANALYZE of settle_due, rolled back):")
    for line in settle_plan:
        if line.startswith(("Planning Time", "Execution Time")):
            print(f"    {line}")
    total = next((float(line.split()[2]) for line in settle_plan if line.startswith("Execution Time")), 0.0)
    if total:
        print(f"    -> {total / batch_size:.2f} ms per settled row inside the statement (before its commit)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

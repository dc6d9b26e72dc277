"""History retention under Agent load: a large history pruned while tool calls keep coming, then
simulated days of new history and pruning, to see the tables' size level off.

    .venv/bin/python -m bench.history_growth [--pomodoros 300000] [--days 30] [--seconds 30]

A throwaway database gets ``--pomodoros`` finished Pomodoros, generated set-wise (INSERT ... SELECT
generate_series, not by HTTP) and backdated evenly over the retention period and one day more: each with its
closed instance, ended sub-session, read-only snapshot, interrupted operation, its two recorded tool
calls, its delivered outbox row and attempt, two messages and a surface event, every id a uuid_v7 of
its own time, as the service makes them. Then, with ``--workers`` Agents running start+interrupt
cycles through ``call_tool_v3`` (the service's one round trip per call) all along:

1. **baseline**: ``--seconds`` of load with no pruning: the calls' p50/p99, and the shared buffers
   one cycle touches (EXPLAIN (ANALYZE, BUFFERS) of its two calls, on their own: the work of the
   hot path, which the machine's load does not move);
2. **catch-up**: one retention round (``service.use_cases.history_retention.prune_history``, the
   loop ``serve`` runs) removes the day older than the period; the calls' p99 meanwhile, and the
   pruner's backend CPU (``/proc/<pid>/stat`` of its one connection) per Pomodoro removed;
3. **steady state**: ``--sim-days`` simulated days, each adding a day of history (the same
   set-wise insert, dated that day) and running a round with that day as "now", then a plain
   VACUUM (what autovacuum does, without waiting for its thresholds): the history tables' size
   per day, which must level off;
4. **after**: the baseline's load again on the pruned database: buffers per cycle.

The machine is shared and two-core: absolute figures move between runs; compare the phases of one
run (ratios). Exits non-zero when a call fails, the pruner removes a live row, or the size grows
more than 5 % over the steady-state days. The hot path's database instructions per call are
``bench.db_instructions``'s (callgrind, deterministic).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from bench.common import percentile, tool_contexts
from harness.database import throwaway_database
from service.db.pool import open_pool
from service.use_cases.history_retention import prune_history

TABLES = (
    "operations", "app_instances", "sub_sessions", "instance_states", "tool_calls", "outbox",
    "outbox_attempts", "messages", "surface_events", "interactions", "capabilities",
)  # fmt: skip

V7 = """encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid())
        PLACING substring(int8send(floor(extract(epoch FROM {at}) * 1000)::bigint) FROM 3)
        FROM 1 FOR 6), 52, 1), 53, 1), 'hex')::uuid"""

# `count` Pomodoros dated evenly from %(start)s over %(span)s seconds, oldest first.
# The messages' trigger looks the sub-session up, which the same statement's insert does not show
# it: the seed runs with triggers off (session_replication_role), its rows consistent by construction
# (every conversation_id given, as the compatibility triggers of migration 0018 would otherwise add).
HISTORY = f"""
WITH r AS (
    SELECT g, 'h-' || (g %% %(conversations)s) AS conversation_id,
           {V7.format(at="t")} AS instance_id, {V7.format(at="t")} AS sub_session_id,
           {V7.format(at="t")} AS operation_id, {V7.format(at="t")} AS event_id,
           {V7.format(at="t")} AS message_id, {V7.format(at="t + interval '1 minute'")} AS app_message_id,
           'call-' || gen_random_uuid() AS start_id, 'call-' || gen_random_uuid() AS interrupt_id, t
    FROM generate_series(%(first)s, %(first)s + %(count)s - 1) g,
         LATERAL (SELECT %(start)s::timestamptz
                         + make_interval(secs => (g - %(first)s) * %(span)s::float8 / %(count)s)) AS at(t)
),
ws AS (
    INSERT INTO workspaces (conversation_id)
    SELECT DISTINCT conversation_id FROM r ON CONFLICT DO NOTHING
),
inst AS (
    INSERT INTO app_instances (instance_id, conversation_id, app_scope, status, opened_at, closed_at)
    SELECT instance_id, conversation_id, 'pomodoro', 'closed', t, t + interval '10 minutes' FROM r
),
sub AS (
    INSERT INTO sub_sessions (sub_session_id, instance_id, conversation_id, status, started_at, ended_at)
    SELECT sub_session_id, instance_id, conversation_id, 'ended', t, t + interval '10 minutes' FROM r
),
snap AS (
    INSERT INTO instance_states (instance_id, app_scope, schema_version, readonly, data, updated_at,
                                 conversation_id)
    SELECT instance_id, 'pomodoro', 1, true, '{{"phase": "interrupted", "focused_seconds": 600}}', t,
           conversation_id
    FROM r
),
ops AS (
    INSERT INTO operations (operation_id, tool, tool_call_id, conversation_id, app_scope, instance_id,
                            state, reason, duration_seconds, activity, started_at, ends_at,
                            finalized_at, result)
    SELECT operation_id, 'pomodoro.start', start_id, conversation_id, 'pomodoro', instance_id,
           'interrupted', 'agent_interrupt', 1500, 'write report', t, t + interval '1500 seconds',
           t + interval '10 minutes',
           jsonb_build_object('state', 'interrupted', 'reason', 'agent_interrupt', 'focused_seconds', 600)
    FROM r
),
calls AS (
    INSERT INTO tool_calls (tool_call_id, conversation_id, tool, fingerprint, outcome, response,
                            created_at)
    SELECT c.id, conversation_id, c.tool, md5(c.id) || md5(c.id), c.outcome, c.body::json, t
    FROM r, LATERAL (VALUES
        (start_id, 'pomodoro.start', 'accepted', json_build_object(
            'tool_call_id', start_id, 'status', 'accepted', 'operation', json_build_object(
                'operation_id', operation_id, 'state', 'focusing', 'started_at', t,
                'ends_at', t + interval '1500 seconds', 'duration_seconds', 1500,
                'activity', 'write report'),
            'instance_id', instance_id, 'sub_session_id', sub_session_id)::text),
        (interrupt_id, 'pomodoro.interrupt', 'interrupted', json_build_object(
            'tool_call_id', interrupt_id, 'status', 'interrupted', 'operation_id', operation_id)::text)
    ) AS c(id, tool, outcome, body)
),
box AS (
    INSERT INTO outbox (event_id, operation_id, tool, tool_call_id, conversation_id, sequence, status,
                        attempts, created_at, delivered_at, payload)
    SELECT event_id, operation_id, 'pomodoro.start', start_id, conversation_id, g, 'delivered', 1,
           t + interval '10 minutes', t + interval '10 minutes 1 second',
           jsonb_build_object('event_id', event_id, 'type', 'tool.result', 'tool', 'pomodoro.start',
                              'tool_call_id', start_id, 'conversation_id', conversation_id,
                              'operation_id', operation_id, 'sequence', g,
                              'result', jsonb_build_object('state', 'interrupted',
                                                           'reason', 'agent_interrupt',
                                                           'focused_seconds', 600))
    FROM r
),
tries AS (
    INSERT INTO outbox_attempts (event_id, attempt, relay_id, started_at, duration_ms, status_code,
                                 outcome, conversation_id)
    SELECT event_id, 1, 'history', t + interval '10 minutes', 3, 204, 'delivered', conversation_id
    FROM r
),
said AS (
    INSERT INTO messages (message_id, conversation_id, sub_session_id, role, text, created_at)
    SELECT message_id, conversation_id, NULL, 'user', 'Start a 25 minute Pomodoro for my report', t
    FROM r
    UNION ALL
    SELECT app_message_id, conversation_id, sub_session_id, 'agent', 'Focus time: 25 minutes.',
           t + interval '1 minute'
    FROM r
)
INSERT INTO surface_events (instance_id, event, created_at, conversation_id)
SELECT instance_id, 'dimmed', t + interval '2 minutes', conversation_id FROM r ORDER BY g
"""

SIZES = "SELECT sum(pg_total_relation_size(c::regclass))::bigint AS bytes FROM unnest(%(tables)s::text[]) c"
SAMPLES = 21
WARM = 3  # a connection's first calls load the catalog caches
CALL = "SELECT outcome FROM call_tool_v3(%s, %s, %s, %s, %s::jsonb, %s, %s::jsonb)"


def _contexts() -> dict[str, tuple[str, str]]:
    """Each cycle's Tool: its decision function and its context, as the service passes them."""
    from service.tools import builtin

    decide = {registration.name: registration.decide for registration in builtin()}
    contexts = tool_contexts()
    return {tool: (decide[tool], contexts[tool]) for tool in ("pomodoro.start", "pomodoro.interrupt")}


class Agents:
    """``workers`` connections running start+interrupt cycles, each in its own conversations; the
    latency of every call is kept in the list ``into`` names."""

    def __init__(self, url: str, workers: int, rate: float = 0.0) -> None:
        self.url = url
        self.workers = workers
        self.rate = rate  # cycles/s in all, paced; 0: as fast as the calls come back
        self.contexts = _contexts()
        self.latencies: list[float] = []
        self.cycles = 0
        self.failures: list[str] = []
        self.stop = asyncio.Event()

    async def _call(
        self, conn: psycopg.AsyncConnection[Any], tool: str, conversation: str, args: str
    ) -> None:
        decide, context = self.contexts[tool]
        began = time.perf_counter()
        row = await (
            await conn.execute(CALL, (uuid.uuid4().hex, conversation, tool, "0" * 64, args, decide, context))
        ).fetchone()
        self.latencies.append(time.perf_counter() - began)
        if row is None or row[0] not in ("accepted", "interrupted"):
            self.failures.append(f"{tool}: {row}")

    async def _worker(self, n: int) -> None:
        async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as conn:
            k = 0
            every = self.workers / self.rate if self.rate else 0.0
            due = time.perf_counter() + every * n / self.workers  # the workers spread evenly
            while not self.stop.is_set():
                if every:
                    due += every
                    await asyncio.sleep(max(0.0, due - time.perf_counter()))
                conversation = f"agent-{n}-{k % 16}"
                await self._call(conn, "pomodoro.start", conversation, '{"duration_seconds": 1500}')
                await self._call(conn, "pomodoro.interrupt", conversation, "{}")
                self.cycles += 1
                k += 1

    def start(self) -> list[asyncio.Task[None]]:
        self.stop.clear()
        return [asyncio.create_task(self._worker(n)) for n in range(self.workers)]

    async def run_for(self, seconds: float) -> tuple[list[float], int]:
        self.latencies, self.cycles = [], 0
        tasks = self.start()
        await asyncio.sleep(seconds)
        self.stop.set()
        await asyncio.gather(*tasks)
        return self.latencies, self.cycles


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _ms(values: list[float], q: float) -> float:
    return percentile(values, q) * 1000


async def _buffers_per_cycle(
    conn: psycopg.AsyncConnection[Any], agents: Agents, seconds: float
) -> tuple[float, list[float]]:
    """The load for ``seconds``, then the shared buffers one start+interrupt cycle touches, as
    EXPLAIN (ANALYZE, BUFFERS) counts them for the call statement and everything it runs (the
    median of ``SAMPLES`` cycles on this connection alone: other backends, autovacuum included, do
    not count)."""
    latencies, _ = await agents.run_for(seconds)
    per_cycle = []
    for n in range(WARM + SAMPLES):
        touched = 0
        conversation = f"sample-{uuid.uuid4().hex[:8]}-{n}"
        for tool, arguments in (
            ("pomodoro.start", '{"duration_seconds": 1500}'),
            ("pomodoro.interrupt", "{}"),
        ):
            decide, context = agents.contexts[tool]
            plan = await (
                await conn.execute(
                    "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + CALL,
                    (uuid.uuid4().hex, conversation, tool, "0" * 64, arguments, decide, context),
                )
            ).fetchone()
            assert plan is not None
            top = plan[0][0]["Plan"]
            touched += top.get("Shared Hit Blocks", 0) + top.get("Shared Read Blocks", 0)
        per_cycle.append(touched)
    return float(statistics.median(per_cycle[WARM:])), latencies


async def _write_day(
    conn: psycopg.AsyncConnection[Any], first: int, count: int, until: datetime, conversations: int
) -> None:
    """A simulated day of history (``count`` Pomodoros from number ``first``) ending at ``until``."""
    await conn.execute("SET session_replication_role = replica")
    await conn.execute(
        HISTORY,
        {"first": first, "count": count, "start": until - timedelta(days=1), "span": 86400,
         "conversations": conversations},
    )  # fmt: skip
    await conn.execute("RESET session_replication_role")


async def run(url: str, args: argparse.Namespace) -> int:
    failed = False
    days = args.days
    now = datetime.now(UTC)
    span = (days + 1) * 86400
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        conversations = max(1, args.pomodoros // 8)
        began = time.perf_counter()
        chunk = 250_000
        await conn.execute("SET session_replication_role = replica")
        for first in range(0, args.pomodoros, chunk):
            count = min(chunk, args.pomodoros - first)
            start = now - timedelta(seconds=span) + timedelta(seconds=span * first / args.pomodoros)
            await conn.execute(
                HISTORY,
                {"first": first, "count": count, "start": start, "span": span * count / args.pomodoros,
                 "conversations": conversations},
            )  # fmt: skip
        await conn.execute("RESET session_replication_role")
        await conn.execute("VACUUM ANALYZE")
        size0 = (await (await conn.execute(SIZES, {"tables": list(TABLES)})).fetchone() or [0])[0]
        seeded = time.perf_counter() - began
        print(
            f"history: {args.pomodoros:,} Pomodoros over {days + 1} days in {seeded:.0f} s, "
            f"{size0 / 2**20:,.0f} MiB in {len(TABLES)} tables ({size0 / args.pomodoros:,.0f} B each)",
            flush=True,
        )

        agents = Agents(url, args.workers, args.rate)
        await agents.run_for(3.0)  # warm
        base_buffers, base = await _buffers_per_cycle(conn, agents, args.seconds)
        print(
            f"baseline ({args.workers} Agents, no pruning, {args.seconds} s): "
            f"{len(base) / 2 / args.seconds:,.0f} cycles/s, "
            f"call p50 {_ms(base, 50):.2f} ms p99 {_ms(base, 99):.2f} ms, "
            f"{base_buffers:,.0f} buffers per cycle",
            flush=True,
        )

        pool = await open_pool(url, size=1, name="history-bench-pruner")
        try:
            async with pool.connection() as pc:
                pid = (await (await pc.execute("SELECT pg_backend_pid() AS pid")).fetchone() or {"pid": 0})[
                    "pid"
                ]
            cpu0 = _cpu_seconds(pid)
            agents.latencies, agents.cycles = [], 0
            tasks = agents.start()
            t0 = time.perf_counter()
            pruned = await prune_history(pool, days, by="history-bench")
            took = time.perf_counter() - t0
            if took < args.seconds:
                await asyncio.sleep(args.seconds - took)
            agents.stop.set()
            await asyncio.gather(*tasks)
            during = agents.latencies
            cpu = _cpu_seconds(pid) - cpu0
            assert pruned is not None
            removed = pruned["operations"]
            print(
                f"catch-up round: {took:.1f} s, removed {json.dumps(pruned)}; pruner backend CPU "
                f"{cpu:.1f} s = {cpu / max(removed, 1) * 1e6:,.0f} µs per Pomodoro removed "
                f"({removed / max(took, 1e-9):,.0f} Pomodoros/s)",
                flush=True,
            )
            ratio = _ms(during, 99) / _ms(base, 99)
            print(
                f"  calls meanwhile: {len(during) / 2 / max(took, args.seconds):,.0f} cycles/s, "
                f"p50 {_ms(during, 50):.2f} ms p99 {_ms(during, 99):.2f} ms "
                f"({ratio:.2f}x the baseline's p99)",
                flush=True,
            )
            expected = args.pomodoros / (days + 1)
            if abs(removed - expected) > expected * 0.05:
                print(f"error: expected about {expected:,.0f} Pomodoros removed, got {removed:,}")
                failed = True

            per_day = args.pomodoros // (days + 1)
            await conn.execute("VACUUM")
            sizes = []
            for day in range(1, args.sim_days + 1):
                sim_now = now + timedelta(days=day)
                await _write_day(conn, args.pomodoros + (day - 1) * per_day, per_day, sim_now, conversations)
                cpu0 = _cpu_seconds(pid)
                t0 = time.perf_counter()
                daily = await prune_history(pool, days, by="history-bench", now=sim_now)
                took = time.perf_counter() - t0
                cpu = _cpu_seconds(pid) - cpu0
                await conn.execute("VACUUM")
                size = (await (await conn.execute(SIZES, {"tables": list(TABLES)})).fetchone() or [0])[0]
                sizes.append(size)
                removed = (daily or {}).get("operations", 0)
                print(
                    f"  day +{day}: wrote {per_day:,}, removed {removed:,} Pomodoros in {took:.1f} s "
                    f"({cpu / max(removed, 1) * 1e6:,.0f} µs CPU each); "
                    f"history tables {size / 2**20:,.0f} MiB",
                    flush=True,
                )
            # Paired windows, back to back so that they share the machine's drift: each simulated day
            # more, the calls without pruning, then the calls while that day's round prunes (padded
            # to the same length). After the size check's days: these Agents' writes stay.
            pairs = [ratio]  # the catch-up round's against the baseline just before it
            for day in range(args.sim_days + 1, args.sim_days + 1 + args.pairs):
                sim_now = now + timedelta(days=day)
                await _write_day(conn, args.pomodoros + (day - 1) * per_day, per_day, sim_now, conversations)
                await conn.execute("VACUUM")
                quiet, _ = await agents.run_for(args.seconds)
                agents.latencies, agents.cycles = [], 0
                tasks = agents.start()
                t0 = time.perf_counter()
                daily = await prune_history(pool, days, by="history-bench", now=sim_now)
                took = time.perf_counter() - t0
                if took < args.seconds:
                    await asyncio.sleep(args.seconds - took)
                agents.stop.set()
                await asyncio.gather(*tasks)
                pairs.append(_ms(agents.latencies, 99) / _ms(quiet, 99))
                print(
                    f"  day +{day}: removed {(daily or {}).get('operations', 0):,} Pomodoros in {took:.1f} s"
                    f" under load; calls' p99 {_ms(quiet, 99):.2f} ms before, "
                    f"{_ms(agents.latencies, 99):.2f} ms while pruning ({pairs[-1]:.2f}x)",
                    flush=True,
                )
            print(
                f"calls' p99 while pruning / just before, paired windows: "
                f"{', '.join(f'{r:.2f}' for r in pairs)}; median {statistics.median(pairs):.2f}x",
                flush=True,
            )
        finally:
            await pool.close()
        if len(sizes) >= 2 and sizes[-1] > sizes[0] * 1.05:
            print(f"error: the tables grew from {sizes[0]:,} to {sizes[-1]:,} bytes over the steady state")
            failed = True

        after_buffers, after = await _buffers_per_cycle(conn, agents, args.seconds)
        print(
            f"after ({args.seconds} s on the pruned history): {len(after) / 2 / args.seconds:,.0f} cycles/s, "
            f"p50 {_ms(after, 50):.2f} ms p99 {_ms(after, 99):.2f} ms, "
            f"{after_buffers:,.0f} buffers per cycle ({after_buffers / base_buffers:.2f}x the baseline's)",
            flush=True,
        )
        live = await (
            await conn.execute("SELECT count(*) FROM operations WHERE conversation_id LIKE 'agent-%'")
        ).fetchone()
        if live is None or live[0] == 0:
            print("error: the Agents' recent operations were removed")
            failed = True
        if agents.failures:
            print(f"error: {len(agents.failures)} calls failed, e.g. {agents.failures[0]}")
            failed = True
    return 1 if failed else 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pomodoros", type=int, default=300_000, help="history before the first round")
    parser.add_argument("--days", type=int, default=30, help="the retention period (HISTORY_RETENTION_DAYS)")
    parser.add_argument("--seconds", type=float, default=20.0, help="each measured load phase")
    parser.add_argument("--workers", type=int, default=4, help="Agents calling at once")
    parser.add_argument("--sim-days", type=int, default=3, help="simulated days of steady state")
    parser.add_argument("--pairs", type=int, default=4, help="days more, each a pair of load windows")
    parser.add_argument(
        "--rate",
        type=float,
        default=0.0,
        help="the Agents' start+interrupt cycles/s in all, paced (0: flat out, the machine saturated)",
    )
    args = parser.parse_args()
    with throwaway_database("history") as url:
        return asyncio.run(run(url, args))


if __name__ == "__main__":
    sys.exit(main())

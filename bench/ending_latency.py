"""How soon the Agent hears an ending: Pomodoros falling due in one second among many focusing, from
each one's ``ends_at`` to the Agent's 2xx, through the real service and relays.

    .venv/bin/python -m bench.ending_latency [--due 1000,5000] [--focusing 100000] [--relays 1,2]
                                             [--lead 3] [--window 1] [--pg-setting NAME=VALUE]
                                             [--relay-env NAME=VALUE] [--service-env NAME=VALUE]
                                             [--versus TREE] [--rounds 1] [--smoke]

A throwaway database gets ``--focusing`` conversations whose Pomodoro ends hours later, started
through the service's own tool-call statement (``bench.seeds``). One ``python -m service serve``
runs its deadline sweeper; the Agent is ``harness.receiver`` in a process of its own, answering 204
at once and noting when each result first arrives. Then, for each ``--due`` count and each
``--relays`` count (that many ``python -m relay`` processes, started afresh), one run:

1. ``--due`` new conversations, each with one earlier result (a Pomodoro started and interrupted)
   delivered first, and then a Pomodoro focusing — all through the service's statement;
2. their periods moved (each keeping its length) so that the deadlines fall evenly over ``--window``
   seconds starting ``--lead`` seconds later: the sweeper finds them by its poll, as it finds a
   period another replica started (``--lead`` exceeds ``SWEEPER_POLL_SECONDS``);
3. the service's sweeper settles each at its deadline and queues its result; after that commit
   the service wakes the relays (a NOTIFY after commit), which claim and POST it.

Per result, from the database and the receiver (one clock: the same machine):

    settle                finalized_at - ends_at         (the sweeper)
    outbox -> POST        the attempt's started_at - the outbox row's created_at (the settling
                          transaction's start: its commit, the wake-up, the claim)
    POST -> 2xx           the first arrival at the receiver - the attempt's started_at
    ends_at -> 2xx        the first arrival - ends_at: what the Agent waits

(The attempt's ``started_at`` is the database's clock as the relay derives it from the claim's
lease, ``relay/clock.py``: late by up to the claim's round trip, so outbox -> POST reads that much
long and POST -> 2xx that much short, its p50 often negative; ends_at -> 2xx is exact.) With
``--pg-setting track_commit_timestamp=on``, outbox -> POST is split at the settling commit:

    settling xact         the commit - the outbox row's created_at (the settling statement)
    commit -> POST        the attempt's started_at - the commit (the wake-up, the claim)

p50/p99/max of each; the CPU per ending of the service, the relays, the database's backends and the
receiver over the run, and how busy the machine's cores were (all its work, others' included); and
the checks: every result arrived, none twice (the receiver's requests per
unique webhook-id), each conversation's earlier result arrived before its ending (per-conversation
order), every due period completed by its deadline and no far one touched. Exits non-zero when a
check fails, not when a figure misses its aim (p99 ends_at -> 2xx: 50 ms at 1,000 due per second,
100 ms at 5,000).

Where the database's work goes, per run: the commits and WAL flushes per ending (``pg_stat_database``,
``pg_stat_wal``: the whole server's, so exact only on a server of the bench's own, ``--pg-setting``),
and, when the server loads ``pg_stat_statements`` (``--pg-setting
shared_preload_libraries=pg_stat_statements``), the statements that took the most time, with their
calls and microseconds per ending.

``--versus TREE`` measures a change to the service or the relay: each run is made twice in a row on
the same database, once with this checkout's service and relays and once with those of the checkout
at TREE (``git worktree add --detach /tmp/before main``; run from this checkout's venv), each
started afresh for its run, in alternating order from one ``--rounds`` round to the next, and the
figures are printed side by side.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row

from bench import seeds
from bench.common import Relays, add_pg_settings, bench_server
from harness.database import throwaway_database
from harness.measure import load_line, machine_busy, percentile, process_cpu
from harness.processes import ROOT, running_service
from harness.receiver import ReceiverProcess
from harness.releases import release_env

RESULTS = """
SELECT x.event_id::text AS event_id, x.conversation_id, x.sequence,
       EXTRACT(EPOCH FROM x.created_at) AS queued, EXTRACT(EPOCH FROM o.ends_at) AS ends_at,
       EXTRACT(EPOCH FROM o.finalized_at) AS finalized, o.state, o.reason,
       (SELECT EXTRACT(EPOCH FROM min(a.started_at)) FROM outbox_attempts a
        WHERE a.event_id = x.event_id) AS posted,
       (SELECT count(*) FROM outbox_attempts a WHERE a.event_id = x.event_id) AS attempts,
       CASE WHEN current_setting('track_commit_timestamp')::boolean
            THEN EXTRACT(EPOCH FROM pg_xact_commit_timestamp(o.xmin)) END AS committed
FROM outbox x JOIN operations o USING (operation_id, conversation_id)
WHERE x.conversation_id LIKE %(prefix)s || '%%'
ORDER BY x.conversation_id, x.sequence
"""


def backends_cpu(database: str) -> float:
    """CPU seconds used so far by the server's processes serving ``database`` (its backends: the
    service's, the relays', the bench's own)."""
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            title = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if title.startswith("postgres:") and f" {database} " in title:
            total += process_cpu(int(entry.name))
    return total


class Cpu:
    """CPU seconds over a window: the service, the relays, the receiver, the database's backends,
    and the whole machine (every process, other work included)."""

    def __init__(self, database: str, service: int, receiver: int, relays: Relays) -> None:
        self._database, self._service, self._receiver, self._relays = database, service, receiver, relays
        self._start = self._sample()
        self.seconds: dict[str, float] = {}

    def _sample(self) -> dict[str, float]:
        return {
            "service": process_cpu(self._service),
            "relays": self._relays.cpu(),
            "receiver": process_cpu(self._receiver),
            "Postgres": backends_cpu(self._database),
            "machine": machine_busy(),
            "wall": time.monotonic(),
        }

    def stop(self) -> None:
        end = self._sample()
        self.seconds = {name: end[name] - self._start[name] for name in end}


# The statements that took the most time over a run (pg_stat_statements, reset at its start).
TOP_STATEMENTS = """
SELECT calls, total_exec_time, rows, regexp_replace(left(query, 400), '\\s+', ' ', 'g') AS query
FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
ORDER BY total_exec_time DESC
LIMIT %(top)s
"""

# The server's commits (of this database) and WAL flushes (all of them) so far.
WAL_AND_COMMITS = """
SELECT (SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()) AS commits,
       wal_sync AS flushes, wal_records AS records
FROM pg_stat_wal
"""


class DatabaseWork:
    """Commits, WAL flushes and (with pg_stat_statements loaded) statements over a run."""

    def __init__(self, url: str) -> None:
        self._url = url
        with psycopg.connect(url, autocommit=True) as conn:
            loaded = conn.execute("SHOW shared_preload_libraries").fetchone()
            self.statements = loaded is not None and "pg_stat_statements" in loaded[0]
            if self.statements:
                conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
                conn.execute("SELECT pg_stat_statements_reset()")
            self._start = self._sample(conn)
        self.counts: dict[str, float] = {}
        self.top: list[tuple[int, float, int, str]] = []

    @staticmethod
    def _sample(conn: psycopg.Connection[Any]) -> dict[str, float]:
        row = conn.execute(WAL_AND_COMMITS).fetchone()
        assert row is not None
        return {"commits": float(row[0]), "flushes": float(row[1]), "records": float(row[2])}

    def stop(self, top: int = 8) -> None:
        with psycopg.connect(self._url, autocommit=True) as conn:
            end = self._sample(conn)
            if self.statements:
                rows = conn.execute(TOP_STATEMENTS, {"top": top}).fetchall()
                self.top = [(int(r[0]), float(r[1]), int(r[2]), str(r[3])) for r in rows]
        self.counts = {name: end[name] - self._start[name] for name in end}

    def lines(self, endings: int) -> list[str]:
        if not self.counts:
            return []
        per = {name: value / max(endings, 1) for name, value in self.counts.items()}
        flushes = self.counts["flushes"] / max(self.counts["commits"], 1)
        lines = [
            f"    per ending       {per['commits']:.2f} commits, {per['flushes']:.2f} WAL flushes "
            f"({flushes:.2f} a commit), {per['records']:.1f} WAL records"
        ]
        for calls, ms, rows, query in self.top:
            lines.append(
                f"      {calls / max(endings, 1):6.2f} calls {ms * 1000 / max(endings, 1):7.1f} µs "
                f"{rows / max(calls, 1):6.1f} rows/call  {query[:110]}"
            )
        return lines


@dataclass
class Run:
    due: int
    relays: int
    total: list[float]
    settle: list[float]
    to_post: list[float]
    post: list[float]
    #: With ``track_commit_timestamp = on``: outbox -> POST split at the settling commit.
    to_commit: list[float]
    commit_to_post: list[float]
    problems: list[str]
    load: str
    cpu: dict[str, float]
    #: Whose relays: "this tree" or the ``--versus`` tree.
    tree: str = "this tree"
    database: list[str] | None = None

    def cpu_line(self) -> str:
        """CPU per ending over the window (from the move to the last arrival), and how busy the
        machine's cores were."""
        if not self.cpu:
            return "n/a"
        names = ("service", "relays", "Postgres", "receiver")
        parts = [f"{name} {self.cpu[name] / self.due * 1e6:,.0f}" for name in names]
        busy = self.cpu["machine"] / max(self.cpu["wall"], 1e-9) / (os.cpu_count() or 1)
        return f"{', '.join(parts)} µs; the machine's cores {busy:.0%} busy over {self.cpu['wall']:.1f} s"

    def stage(self, values: list[float]) -> str:
        return (
            f"min {min(values, default=float('nan')):6.1f}  p50 {percentile(values, 50):6.1f}  "
            f"p99 {percentile(values, 99):6.1f}  max {max(values, default=float('nan')):6.1f} ms"
        )


def wait_for(receiver: ReceiverProcess, events: set[str], timeout: float) -> dict[str, float]:
    """Until every one of ``events`` arrived; the first arrivals then."""
    deadline = time.monotonic() + timeout
    while True:
        arrivals = receiver.arrivals()
        if events <= arrivals.keys() or time.monotonic() > deadline:
            return arrivals
        time.sleep(0.05)


def queued_events(url: str, prefix: str) -> set[str]:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT event_id::text FROM outbox WHERE conversation_id LIKE %s || '%%'", (prefix,)
        ).fetchall()
    return {r[0] for r in rows}


def one_run(
    url: str,
    service: int,
    receiver: ReceiverProcess,
    logs: Path,
    index: int,
    due: int,
    relays: int,
    args: Any,
    tree: Path | None = None,
) -> Run:
    prefix = f"r{index}-"
    problems: list[str] = []
    env = dict(e.split("=", 1) for e in args.relay_env)
    processes = Relays(url, receiver.url, relays, logs, env=env, tree=tree)
    try:
        seeds.finished(url, prefix, due)  # each conversation's earlier result
        earlier = queued_events(url, prefix)
        seeds.focusing(url, prefix, due, duration_seconds=600)
        before = wait_for(receiver, earlier, 120)
        if not earlier <= before.keys():
            problems.append(f"{len(earlier - before.keys())} earlier results never arrived")
        requests_before = receiver.stats()["requests"]
        cpu = Cpu(str(psycopg.conninfo.conninfo_to_dict(url)["dbname"]), service, receiver.pid, processes)
        work = DatabaseWork(url)
        with psycopg.connect(url, autocommit=True) as conn:
            moved = seeds.move_deadlines(conn, prefix, args.lead, args.window)
        load = load_line()
        if moved != due:
            problems.append(f"moved {moved} periods, not {due}")
        time.sleep(args.lead + args.window)
        deadline = time.monotonic() + args.timeout
        while len(queued_events(url, prefix)) < 2 * due and time.monotonic() < deadline:
            time.sleep(0.1)
        arrivals = wait_for(receiver, queued_events(url, prefix), max(1.0, deadline - time.monotonic()))
        cpu.stop()
        time.sleep(0.5)  # the relays record their attempts after the 2xx
        work.stop()
        repeats = receiver.stats()["requests"] - requests_before - due
    finally:
        processes.stop()
    with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
        rows = conn.execute(RESULTS, {"prefix": prefix}).fetchall()
        far = conn.execute(
            "SELECT count(*) AS n FROM operations WHERE conversation_id LIKE 'far-%%' AND state = 'focusing'"
        ).fetchone()
    endings = [r for r in rows if r["sequence"] == 2]
    settled = [r for r in endings if r["state"] == "completed" and r["reason"] == "deadline_reached"]
    if len(settled) != due:
        problems.append(f"{len(settled)} of {due} due periods completed at their deadline")
    missing = [r for r in endings if r["event_id"] not in arrivals]
    if missing:
        problems.append(f"{len(missing)} of {due} endings never reached the Agent")
    if repeats:
        problems.append(f"{repeats} results delivered more than once")
    by_conversation: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_conversation.setdefault(r["conversation_id"], []).append(r)
    out_of_order = sum(
        1
        for results in by_conversation.values()
        if [r["sequence"] for r in sorted(results, key=lambda r: arrivals.get(r["event_id"], float("inf")))]
        != sorted(r["sequence"] for r in results)
    )
    if out_of_order:
        problems.append(f"{out_of_order} conversations heard their results out of order")
    if far is None or far["n"] != args.focusing:
        problems.append("a far period was touched")
    heard = [r for r in settled if r["event_id"] in arrivals and r["posted"] is not None]
    return Run(
        due=due,
        relays=relays,
        total=[(arrivals[r["event_id"]] - float(r["ends_at"])) * 1000 for r in heard],
        settle=[(float(r["finalized"]) - float(r["ends_at"])) * 1000 for r in settled],
        to_post=[(float(r["posted"]) - float(r["queued"])) * 1000 for r in heard],
        post=[(arrivals[r["event_id"]] - float(r["posted"])) * 1000 for r in heard],
        to_commit=[(float(r["committed"]) - float(r["queued"])) * 1000 for r in heard if r["committed"]],
        commit_to_post=[(float(r["posted"]) - float(r["committed"])) * 1000 for r in heard if r["committed"]],
        problems=problems,
        load=load,
        cpu=cpu.seconds,
        tree="this tree" if tree is None else str(tree),
        database=work.lines(due),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--due", default="1000,5000", help="periods falling due in the window, per run")
    parser.add_argument("--focusing", type=int, default=100_000, help="periods due hours later")
    parser.add_argument("--relays", default="1,2", help="relay processes, per run")
    parser.add_argument("--lead", type=float, default=3.0, help="seconds from the move to the first deadline")
    parser.add_argument("--window", type=float, default=1.0, help="the deadlines spread over this")
    parser.add_argument("--timeout", type=float, default=120.0, help="give up waiting after this")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, seconds: that it still runs")
    parser.add_argument(
        "--relay-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a setting for the relays, e.g. RELAY_CONCURRENCY=256; repeatable",
    )
    parser.add_argument(
        "--service-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a setting for the service, e.g. SWEEPER_BATCH_SIZE=50; repeatable",
    )
    parser.add_argument(
        "--versus",
        type=Path,
        metavar="TREE",
        help="also make every run with the service and relays of the checkout at TREE, alternating",
    )
    parser.add_argument("--rounds", type=int, default=1, help="how many times to make every run")
    add_pg_settings(parser)
    args = parser.parse_args(argv)
    if args.smoke:
        args.due, args.focusing, args.relays, args.lead = "20", 50, "1", 2.0
    dues = [int(n) for n in args.due.split(",")]
    relay_counts = [int(n) for n in args.relays.split(",")]
    if not (all(1 <= d <= 20_000 for d in dues) and 0 <= args.focusing <= 1_000_000 and args.lead >= 1.5):
        parser.error("keep it bounded: --due 1..20000, --focusing 0..1000000, --lead >= 1.5")
    print(f"ending_latency: {time.strftime('%Y-%m-%d %H:%M:%S %Z')}, {load_line()}", flush=True)
    if args.pg_setting:
        print(f"    server settings: {', '.join(args.pg_setting)}", flush=True)
    if args.relay_env:
        print(f"    relay settings: {', '.join(args.relay_env)}", flush=True)
    if args.service_env:
        print(f"    service settings: {', '.join(args.service_env)}", flush=True)
    trees: list[Path | None] = [None]
    if args.versus is not None:
        if not (args.versus / "relay" / "__main__.py").is_file():
            parser.error(f"--versus {args.versus}: no relay there")
        trees.append(args.versus.resolve())
        print(f"    versus the service and relays of {args.versus}", flush=True)
    runs: list[Run] = []
    with contextlib.ExitStack() as stack:
        stack.enter_context(bench_server(args.pg_setting))
        logs = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-ending-")))
        url = stack.enter_context(throwaway_database("ending"))
        began = time.monotonic()
        seeds.focusing(url, "far-", args.focusing, duration_seconds=7200)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE")
        print(f"    seeded {args.focusing} focusing in {time.monotonic() - began:.1f} s", flush=True)
        receiver = stack.enter_context(contextlib.closing(ReceiverProcess(logs)))
        service_env = dict(e.split("=", 1) for e in args.service_env)
        if args.versus is None:
            service = stack.enter_context(running_service(url, logs, env=service_env))
        for round_ in range(max(args.rounds, 1)):
            plan = [
                (due, relays, tree)
                for due in dues
                for relays in relay_counts
                for tree in (trees if round_ % 2 == 0 else trees[::-1])
            ]
            for due, relays, tree in plan:
                with contextlib.ExitStack() as own:
                    if args.versus is not None:  # each run its tree's service
                        env = service_env if tree is None else {**service_env, **release_env(tree)}
                        service = own.enter_context(running_service(url, logs, env=env, cwd=tree or ROOT))
                    run = one_run(url, service.pid, receiver, logs, len(runs), due, relays, args, tree)
                runs.append(run)
                print(
                    f"\n{due} due in {args.window:g} s among {args.focusing} focusing, {relays} relay(s) "
                    f"of {run.tree} ({run.load})"
                )
                print(f"    ends_at -> 2xx   {run.stage(run.total)}")
                print(f"    settle           {run.stage(run.settle)}")
                print(f"    outbox -> POST   {run.stage(run.to_post)}")
                if run.to_commit:
                    print(f"      settling xact  {run.stage(run.to_commit)}")
                    print(f"      commit -> POST {run.stage(run.commit_to_post)}")
                print(f"    POST -> 2xx      {run.stage(run.post)}")
                print(f"    CPU per ending   {run.cpu_line()}")
                for line in run.database or []:
                    print(line)
                print(
                    "    checks: "
                    + ("; ".join(run.problems) or "every result once, in order per conversation"),
                    flush=True,
                )
    print(
        "\n| due in 1 s | relays | ends_at → 2xx p50 / p99 / max | settle p99 | outbox → POST p99 "
        "| POST → 2xx p99 |"
    )
    print("| ---: | ---: | --- | ---: | ---: | ---: |")
    for run in runs:
        whose = "" if len(trees) == 1 else f" ({run.tree})"
        print(
            f"| {run.due:,} | {run.relays}{whose} | {percentile(run.total, 50):.1f} / "
            f"**{percentile(run.total, 99):.1f}** / "
            f"{max(run.total, default=float('nan')):.1f} ms | {percentile(run.settle, 99):.1f} ms | "
            f"{percentile(run.to_post, 99):.1f} ms | {percentile(run.post, 99):.1f} ms |"
        )
    return 1 if any(run.problems for run in runs) else 0


if __name__ == "__main__":
    sys.exit(main())

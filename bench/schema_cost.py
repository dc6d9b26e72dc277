"""The schema's cost, part by part: what each trigger, index, foreign key and check adds to one
Pomodoro's writes.

    .venv/bin/python -m bench.schema_cost [--seconds 5] [--clients 16] [--only NAME ...] [--no-parts]

A Postgres of its own (fsync and synchronous commit on, ``pg_stat_statements`` and
``pg_walinspect``), the schema migrated to head, and pgbench running *cycles* — the raw-SQL
ceiling of ``bench/tool_cycles.py`` (one statement per tool call: ``pomodoro.start``, then
``pomodoro.interrupt``, whose body is ``settle_focusing``'s own text) followed by the delivery of
its result with the relay's own ``CLAIM`` and ``RECORD_OUTCOMES`` statements (``relay/claims.py``),
bound to the client's conversation. So a cycle is the whole life of one result in the database.

Each variant drops one part (a trigger; an index or the unique constraint it backs; a foreign
key; a table's checks; a generated column), runs pgbench for ``--seconds`` on emptied tables
after a checkpoint, and puts the part back. The baseline (nothing dropped) runs first, every few
variants and last; its spread is the noise. Per cycle: Postgres CPU (/proc: backends and
background processes), WAL bytes, rows and index entries written (from the WAL records), buffers
dirtied, and cycles/s (a wall-clock figure: only a ratio within one run means anything). A part's
cost is the baseline's median minus the variant.

``reshape`` variants try a different form of the same protection (they change the schema, run,
and change it back): their figures show what a reshape would gain before it is written.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from bench.measured_server import measured_server, postmaster_pid
from bench.schema_cycles import DATABASE, SIZES, SLOTS, VARIANT, cycle_script, prime_script
from bench.schema_parts import discover, groups, reshapes
from bench.seeds import HISTORY
from bench.server_usage import Usage, UsageMeter
from bench.sql_ceiling import PGBENCH
from harness.database import with_database
from relay.circuit import ENSURE as ENSURE_ENDPOINT
from service.domain.delivery import AGENT_ENDPOINT


@dataclass
class Result:
    name: str
    kind: str
    cycles: int
    seconds: float
    usage: Usage
    per_cycle: dict[str, float] = field(default_factory=dict)


# --- running -----------------------------------------------------------------------------------

_PROCESSED = re.compile(r"number of transactions actually processed: (\d+)")


class Harness:
    """Two copies of the migrated database on one server, the baseline and the variant, whose
    cycles run at the same time: whatever else loads the machine loads both alike. Both start
    with the same history (``--history`` finished Pomodoros), and every run adds to it."""

    def __init__(self, server: Any, url: str, args: argparse.Namespace, work: Path) -> None:
        self.server = server
        self.args = args
        self.work = work
        self.postmaster = postmaster_pid(server.data)
        self.runs = 0
        self.script = work / "cycle.sql"
        self.script.write_text(cycle_script())
        self.prime = work / "prime.sql"
        self.prime.write_text(prime_script())
        if args.history:
            began = time.perf_counter()
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(HISTORY, {"pomodoros": args.history})
                conn.execute("VACUUM ANALYZE")
            print(
                f"    history: {args.history:,} finished Pomodoros in {time.perf_counter() - began:.0f} s",
                flush=True,
            )
            with psycopg.connect(url, autocommit=True) as conn:
                sizes = conn.execute(SIZES).fetchall()
            total = sum(int(heap) + int(indexes) for _, heap, indexes in sizes)
            print(f"    on disk per finished Pomodoro: {total / args.history:,.0f} B (table, its indexes):")
            for table, heap, indexes in sizes:
                print(
                    f"      {table:<18} {int(heap) / args.history:6,.0f} B  "
                    f"{int(indexes) / args.history:6,.0f} B"
                )
        with psycopg.connect(url, autocommit=True) as conn:
            # The Agent's endpoint as a relay registers it: the claim reads its gate.
            conn.execute(ENSURE_ENDPOINT, {"endpoint": AGENT_ENDPOINT})
        with psycopg.connect(server.admin_url, autocommit=True) as admin:
            admin.execute(f"CREATE DATABASE {VARIANT} TEMPLATE {DATABASE}")
        self.urls = {DATABASE: url, VARIANT: with_database(url, VARIANT)}
        self.conns = {name: psycopg.connect(u, autocommit=True) for name, u in self.urls.items()}
        self.conn = self.conns[VARIANT]

    def close(self) -> None:
        for conn in self.conns.values():
            conn.close()

    def apply(self, statements: Sequence[str]) -> None:
        """Changes the variant's schema."""
        with self.conn.transaction():
            for statement in statements:
                self.conn.execute(statement)

    def _start_pgbench(self, script: Path, *args: str) -> dict[str, subprocess.Popen[str]]:
        """The script on both databases at once, ``--clients`` each."""
        return {
            name: subprocess.Popen(
                [
                    PGBENCH,
                    "-n",
                    "-M",
                    "prepared",
                    "-c",
                    str(self.args.clients),
                    "-j",
                    "1",
                    *args,
                    "-D",
                    f"run={self.runs}",
                    "-f",
                    str(script),
                    url,
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            for name, url in self.urls.items()
        }

    @staticmethod
    def _finish_pgbench(running: dict[str, subprocess.Popen[str]]) -> dict[str, str]:
        outputs = {}
        for name, process in running.items():
            output, _ = process.communicate()
            if process.returncode != 0:
                raise RuntimeError(f"pgbench on {name} failed ({process.returncode}):\n{output[-2000:]}")
            outputs[name] = output
        return outputs

    def run(self, name: str, kind: str) -> tuple[Result, Result]:
        """The baseline's result and the variant's, measured side by side.

        pgbench runs a second longer than the window and logs each cycle's end: the window opens
        after its connections are up and closes before they go, so each backend's CPU is read
        from /proc while it lives, and the cycles counted are those that ended inside it."""
        self.runs += 1
        self._finish_pgbench(self._start_pgbench(self.prime, "-t", str(SLOTS), "-D", "n=-1"))
        # Statistics as autovacuum keeps them, then a checkpoint: every window starts as long
        # after one as the others, and its first touch of a page writes a full-page image.
        for conn in self.conns.values():
            conn.execute("ANALYZE")
        self.conns[DATABASE].execute("CHECKPOINT")
        logs = self.work / "logs"
        shutil.rmtree(logs, ignore_errors=True)
        logs.mkdir()
        meters = {
            db: UsageMeter(self.server.admin_url, url, db, self.postmaster, reset_statements=db == DATABASE)
            for db, url in self.urls.items()
        }
        seconds = self.args.seconds
        running = self._start_pgbench(
            self.script,
            "-T",
            str(seconds + 2),
            "-D",
            f"n={SLOTS - 1}",
            "-l",
            "--log-prefix",
            str(logs / "x"),
        )
        for meter in meters.values():
            meter.prepare()
        time.sleep(0.7)
        for meter in meters.values():
            meter.begin()
        opened = time.time()
        time.sleep(seconds)
        closed = time.time()
        for meter in meters.values():
            meter.end()
        meters[VARIANT].align(meters[DATABASE])
        usages = {db: meter.report() for db, meter in meters.items()}
        self._finish_pgbench(running)
        ended = self._cycle_ends(logs, running)
        results = []
        for db in (DATABASE, VARIANT):
            total = len(ended[db])
            delivered = (
                self.conns[db]
                .execute(
                    "SELECT count(*) FROM outbox WHERE status = 'delivered' AND conversation_id LIKE %s",
                    (f"pgb-{self.runs}-%",),
                )
                .fetchone()
            )
            if delivered is None or int(delivered[0]) != total:
                raise RuntimeError(f"{name}: {delivered} results delivered after {total} cycles")
            cycles = sum(1 for t in ended[db] if opened <= t <= closed)
            usage = usages[db]
            n = max(cycles, 1)
            result = Result(name if db == VARIANT else "baseline", kind, cycles, closed - opened, usage)
            result.per_cycle = {
                # The server's background processes (walwriter, checkpointer) serve both
                # databases: each one's figure is its own backends.
                "cpu_us": usage.cpu.get("backends", 0.0) / n * 1e6,
                # WAL records of its relations (commit records name no relation).
                "wal": sum(r.wal_bytes for r in usage.relations.values()) / n,
                "fpi": sum(r.fpi_bytes for r in usage.relations.values()) / n,
                "rows": usage.rows / n,
                "index": usage.index_entries / n,
                "dirtied": usage.dirtied / n,
                "rate": cycles / (closed - opened),
            }
            results.append(result)
        return results[0], results[1]

    @staticmethod
    def _cycle_ends(logs: Path, running: dict[str, subprocess.Popen[str]]) -> dict[str, list[float]]:
        """When each cycle ended (unix time), per database, from pgbench's transaction logs
        (``client transaction latency script epoch microseconds``), named by pgbench's pid."""
        ended: dict[str, list[float]] = {}
        for db, process in running.items():
            times = ended.setdefault(db, [])
            for log in logs.glob(f"x.{process.pid}*"):
                for line in log.read_text().splitlines():
                    fields = line.split()
                    if len(fields) >= 6:
                        times.append(int(fields[4]) + int(fields[5]) / 1e6)
        return ended


def _saved(result: Result, around: dict[str, float], key: str) -> float:
    return around[key] - result.per_cycle[key]


def _progress(result: Result, around: dict[str, float]) -> str:
    return (
        f"    {result.name:<58} CPU {result.per_cycle['cpu_us']:6,.0f} us "
        f"({_saved(result, around, 'cpu_us'):+5,.0f})"
        f"  WAL {result.per_cycle['wal']:6,.0f} B ({_saved(result, around, 'wal'):+5,.0f})"
    )


def _line(result: Result, around: dict[str, float]) -> str:
    cpu = _saved(result, around, "cpu_us")
    return (
        f"| {result.name} | {cpu:+,.0f} ({cpu / around['cpu_us']:+.0%}) "
        f"| {_saved(result, around, 'wal'):+,.0f} "
        f"| {_saved(result, around, 'index'):+.1f} | {_saved(result, around, 'rows'):+.1f} "
        f"| {result.per_cycle['rate'] / around['rate']:.2f} |"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=int, default=5, help="pgbench seconds per variant")
    parser.add_argument("--clients", type=int, default=2, help="pgbench clients on each copy")
    parser.add_argument("--only", nargs="*", default=None, help="variants whose name contains one of these")
    parser.add_argument("--calibrations", type=int, default=2, help="runs of the two copies alike first")
    parser.add_argument(
        "--history", type=int, default=200000, help="finished Pomodoros in the tables before the first run"
    )
    args = parser.parse_args(argv)
    print(
        f"schema_cost: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at start, "
        f"{args.clients} clients, {args.seconds} s per variant, {time.strftime('%Y-%m-%d %H:%M:%S')}",
        flush=True,
    )
    began = time.perf_counter()
    with (
        measured_server(DATABASE) as (server, url),
        tempfile.TemporaryDirectory(prefix="bench-schema-cost-") as tmp,
    ):
        harness = Harness(server, url, args, Path(tmp))
        parts = discover(harness.conn)
        variants = [*parts, *groups(parts), *reshapes(harness.conn)]
        if args.only:
            variants = [v for v in variants if any(word in v.name for word in args.only)]
        # First the two copies as they are: their difference is the noise floor.
        calibration = [
            harness.run("nothing (the two copies alike)", "calibration") for _ in range(args.calibrations)
        ]
        results: list[tuple[Result, dict[str, float]]] = []
        for base_result, same in calibration:
            results.append((same, base_result.per_cycle))
            print(_progress(same, base_result.per_cycle), flush=True)
        baselines = [b for b, _ in calibration]
        for part in variants:
            harness.apply(part.drop)
            try:
                base_result, result = harness.run(part.name, part.kind)
            finally:
                harness.apply(part.restore)
            baselines.append(base_result)
            results.append((result, base_result.per_cycle))
            print(_progress(result, base_result.per_cycle), flush=True)
        harness.close()

    base = {key: statistics.median(b.per_cycle[key] for b in baselines) for key in baselines[0].per_cycle}
    spread = {
        key: (min(b.per_cycle[key] for b in baselines), max(b.per_cycle[key] for b in baselines))
        for key in ("cpu_us", "wal", "rate")
    }
    noise = max((abs(_saved(r, around, "cpu_us")) for r, around in results[: args.calibrations]), default=0.0)
    print(
        f"\nbaseline (median of {len(baselines)}): {base['cpu_us']:,.0f} us CPU of Postgres backends "
        "per cycle "
        f"({spread['cpu_us'][0]:,.0f}-{spread['cpu_us'][1]:,.0f}; the two copies alike differed by up to "
        f"{noise:,.0f}), "
        f"{base['wal']:,.0f} B WAL ({spread['wal'][0]:,.0f}-{spread['wal'][1]:,.0f}), "
        f"{base['rows']:.1f} rows, "
        f"{base['index']:.1f} index entries, {base['dirtied']:.1f} buffers dirtied, "
        f"{base['rate']:,.0f} cycles/s ({spread['rate'][0]:,.0f}-{spread['rate'][1]:,.0f})\n"
    )
    print("Each variant against the baseline run beside it (saved = baseline - variant):\n")
    print(
        "| dropped | Postgres CPU us/cycle saved | WAL B/cycle saved | index entries saved "
        "| rows saved | cycles/s x baseline |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for result, around in results:
        print(_line(result, around))
    print(f"\nschema_cost: {time.perf_counter() - began:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

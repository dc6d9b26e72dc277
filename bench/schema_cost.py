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

from bench.seeds import HISTORY
from bench.server_usage import Usage, UsageMeter, measured_server, postmaster_pid
from bench.tool_cycles import INTERRUPT_SQL, PGBENCH, START_SQL
from relay.circuit import ENSURE as ENSURE_ENDPOINT
from relay.claims import CLAIM, RECORD_OUTCOMES
from service.domain.delivery import AGENT_ENDPOINT
from tests.support.database import with_database
from tests.support.processes import ROOT

DATABASE = "schema_cost"
VARIANT = "schema_cost_variant"
# The tables a cycle writes; every other table is left alone.
CYCLE_TABLES = (
    "workspaces",
    "app_instances",
    "sub_sessions",
    "instance_states",
    "operations",
    "tool_calls",
    "outbox",
    "outbox_attempts",
    "projection_events",
)

# --- the cycle: each client keeps SLOTS conversations focusing and, per cycle, interrupts the one
# it started SLOTS cycles ago, delivers that result, and starts a new period there. So a row is
# settled long after it was written, as in production (a Pomodoro lasts 25 minutes), when the pages
# around it have filled up: whether an update can stay on its page (HOT) is decided as it would be.

SLOTS = 100
CONVERSATION = "'pgb-' || :client_id::text"
# Each run names its conversations afresh (-D run=N): the tables keep the history of every run.
SLOT_CONVERSATION = "('pgb-' || :run::text || '-' || :client_id::text || '-' || :slot::text)"
NEXT_SLOT = "\\set n :n + 1\n\\set slot :n % " + str(SLOTS) + "\n"


def _one_line(statement: str) -> str:
    """pgbench ends a statement at a semicolon or at ``\\gset``; one line each keeps that simple."""
    return " ".join(statement.split())


def _in_slot(statement: str) -> str:
    assert CONVERSATION in statement
    return statement.replace(CONVERSATION, SLOT_CONVERSATION)


def _claim_sql() -> str:
    """``relay.claims.CLAIM`` for the client's conversation (its head-of-line row)."""
    bound = CLAIM.replace(
        "AND o.next_attempt_at <= now()",
        f"AND o.next_attempt_at <= now() AND o.conversation_id = {CONVERSATION}",
        1,
    )
    assert CONVERSATION in bound, "the claim's due condition moved"
    for name, value in {
        "%(endpoint)s": f"'{AGENT_ENDPOINT}'",
        "%(busy)s::uuid[]": "'{}'::uuid[]",
        "%(limit)s": "1",
        "%(relay_id)s": "'pgbench'",
        "%(lease_seconds)s": "30",
    }.items():
        bound = bound.replace(name, value)
    assert "%(" not in bound, "CLAIM has parameters this bench does not bind"
    return bound


def _record_sql() -> str:
    """``relay.claims.RECORD_OUTCOMES`` for the one row just claimed, delivered (a 204)."""
    bound = RECORD_OUTCOMES
    for name, value in {
        "%(event_ids)s": "ARRAY[:event_id]",
        "%(leases)s": "ARRAY[:lease_expires_at]",
        "%(verdicts)s": "ARRAY['delivered']",
        "%(delays)s": "ARRAY[0]",
        "%(errors)s": "ARRAY[NULL]",
        "%(started_ats)s": "ARRAY[now()]",
        "%(durations)s": "ARRAY[3]",
        "%(status_codes)s": "ARRAY[204]",
        "%(error_classes)s": "ARRAY[NULL]",
        "%(excerpts)s": "ARRAY[NULL]",
        "%(refunds)s": "ARRAY[0]",
        "%(relay_id)s": "'pgbench'",
        "%%": "%",
    }.items():
        bound = bound.replace(name, value)
    assert "%(" not in bound, "RECORD_OUTCOMES has parameters this bench does not bind"
    return bound


def prime_script() -> str:
    """A start in each slot, run once per slot before the measured cycles."""
    return NEXT_SLOT + _one_line(_in_slot(START_SQL)) + "\n"


def cycle_script() -> str:
    """Interrupt the slot's period, deliver its result (claim, record), start a new one there."""
    return (
        NEXT_SLOT
        + "\n".join(
            [
                _one_line(_in_slot(INTERRUPT_SQL)),
                _one_line(_in_slot(_claim_sql())).rstrip(";") + " \\gset",
                _one_line(_record_sql()).rstrip(";") + ";",
                _one_line(_in_slot(START_SQL)),
            ]
        )
        + "\n"
    )


# --- the parts ---------------------------------------------------------------------------------


@dataclass
class Part:
    name: str
    kind: str
    drop: list[str]
    restore: list[str]


@dataclass
class Result:
    name: str
    kind: str
    cycles: int
    seconds: float
    usage: Usage
    per_cycle: dict[str, float] = field(default_factory=dict)


def _tables_sql() -> str:
    return "(" + ", ".join(f"'{t}'" for t in CYCLE_TABLES) + ")"


def discover(conn: psycopg.Connection[Any]) -> list[Part]:
    """Every trigger, non-primary index (with the constraint it backs), foreign key and table
    check on the cycle's tables, as parts that can be dropped and put back."""
    tables = _tables_sql()
    parts: list[Part] = []
    for name, table, definition in conn.execute(
        "SELECT t.tgname, t.tgrelid::regclass::text, pg_get_triggerdef(t.oid) FROM pg_trigger t "
        f"WHERE NOT t.tgisinternal AND t.tgrelid::regclass::text IN {tables} ORDER BY 2, 1"
    ).fetchall():
        if name == "tool_calls_legacy_status":
            # The previous release's HTTP status, filled for it until the next contract step;
            # without the trigger the column must take NULL, and the rows get theirs back after.
            parts.append(
                Part(
                    f"trigger {name} (for the previous release)",
                    "trigger",
                    [
                        f"DROP TRIGGER {name} ON {table}",
                        f"ALTER TABLE {table} ALTER COLUMN status_code DROP NOT NULL",
                    ],
                    [
                        f"UPDATE {table} SET status_code = legacy_http_status("
                        "coalesce(response ->> 'status', response ->> 'error')) WHERE status_code IS NULL",
                        f"ALTER TABLE {table} ALTER COLUMN status_code SET NOT NULL",
                        definition,
                    ],
                )
            )
            continue
        parts.append(Part(f"trigger {name}", "trigger", [f"DROP TRIGGER {name} ON {table}"], [definition]))
    for index, table, definition, constraint, constraint_def in conn.execute(
        "SELECT i.indexrelid::regclass::text, i.indrelid::regclass::text, pg_get_indexdef(i.indexrelid), "
        "       c.conname, pg_get_constraintdef(c.oid) "
        "FROM pg_index i "
        "LEFT JOIN pg_constraint c ON c.conindid = i.indexrelid AND c.contype IN ('u', 'x') "
        "     AND c.conrelid = i.indrelid "
        f"WHERE NOT i.indisprimary AND i.indrelid::regclass::text IN {tables} ORDER BY 2, 1"
    ).fetchall():
        if constraint:
            parts.append(
                Part(
                    f"unique {constraint}",
                    "index",
                    [f"ALTER TABLE {table} DROP CONSTRAINT {constraint}"],
                    [f"ALTER TABLE {table} ADD CONSTRAINT {constraint} {constraint_def}"],
                )
            )
        else:
            parts.append(Part(f"index {index}", "index", [f"DROP INDEX {index}"], [definition]))
    for name, table, definition in conn.execute(
        "SELECT conname, conrelid::regclass::text, pg_get_constraintdef(oid) FROM pg_constraint "
        f"WHERE contype = 'f' AND conrelid::regclass::text IN {tables} ORDER BY 2, 1"
    ).fetchall():
        parts.append(
            Part(
                f"foreign key {name}",
                "foreign key",
                [f"ALTER TABLE {table} DROP CONSTRAINT {name}"],
                [f"ALTER TABLE {table} ADD CONSTRAINT {name} {definition}"],
            )
        )
    checks = conn.execute(
        "SELECT conname, conrelid::regclass::text, pg_get_constraintdef(oid) FROM pg_constraint "
        f"WHERE contype = 'c' AND conrelid::regclass::text IN {tables} ORDER BY 2, 1"
    ).fetchall()
    parts.append(
        Part(
            f"every check ({len(checks)})",
            "check",
            [f"ALTER TABLE {table} DROP CONSTRAINT {name}" for name, table, _ in checks],
            [f"ALTER TABLE {table} ADD CONSTRAINT {name} {definition}" for name, table, definition in checks],
        )
    )
    for table, column, expression in conn.execute(
        "SELECT table_name, column_name, generation_expression FROM information_schema.columns "
        f"WHERE is_generated = 'ALWAYS' AND table_name IN {tables}"
    ).fetchall():
        column_type = conn.execute(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
            "WHERE attrelid = %s::regclass AND attname = %s",
            (table, column),
        ).fetchone()
        assert column_type is not None
        parts.append(
            Part(
                f"generated column {table}.{column}",
                "generated",
                [f"ALTER TABLE {table} ALTER COLUMN {column} DROP EXPRESSION"],
                [
                    f"ALTER TABLE {table} DROP COLUMN {column}",
                    f"ALTER TABLE {table} ADD COLUMN {column} {column_type[0]} "
                    f"GENERATED ALWAYS AS ({expression}) STORED",
                ],
            )
        )
    return parts


def groups(parts: Sequence[Part]) -> list[Part]:
    """Parts taken together: every projection trigger; everything at once (the leanest schema
    the same writes can run on: primary keys only)."""

    def together(name: str, kind: str, chosen: Sequence[Part]) -> Part:
        # Dropped in the order given, put back in reverse.
        return Part(
            name,
            kind,
            [s for p in chosen for s in p.drop],
            [s for p in reversed(chosen) for s in p.restore],
        )

    projection = [p for p in parts if p.kind == "trigger" and p.name.startswith("trigger project_")]
    order = {"trigger": 0, "foreign key": 1, "index": 2, "check": 3, "generated": 4}
    everything = sorted(parts, key=lambda p: order[p.kind])
    return [
        together("every projection trigger", "group", projection),
        together("everything above (primary keys only)", "group", everything),
    ]


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


SIZES = f"""
SELECT c.relname, pg_table_size(c.oid), pg_indexes_size(c.oid)
FROM pg_class c
WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'r' AND c.relname IN {_tables_sql()}
ORDER BY pg_total_relation_size(c.oid) DESC
"""


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


def reshapes(conn: psycopg.Connection[Any]) -> list[Part]:
    """Other forms of the same protection, and two probes, tried before anything is written:
    ``saved`` is what the form would save (negative: what it would add)."""

    def trigger(name: str) -> str:
        row = conn.execute(
            "SELECT pg_get_triggerdef(oid) FROM pg_trigger WHERE tgname = %s AND NOT tgisinternal", (name,)
        ).fetchone()
        assert row is not None, name
        return str(row[0])

    final, readonly = trigger("operations_final_is_final"), trigger("instance_states_readonly_is_final")
    guarded = [
        "DROP TRIGGER operations_final_is_final ON operations",
        "DROP TRIGGER instance_states_readonly_is_final ON instance_states",
        "CREATE TRIGGER operations_final_is_final BEFORE UPDATE ON operations FOR EACH ROW "
        "WHEN (OLD.state <> 'focusing') EXECUTE FUNCTION operations_final_is_final()",
        "CREATE TRIGGER instance_states_readonly_is_final BEFORE UPDATE ON instance_states FOR EACH ROW "
        "WHEN (OLD.readonly) EXECUTE FUNCTION instance_states_readonly_is_final()",
    ]
    unguarded = [
        "DROP TRIGGER operations_final_is_final ON operations",
        "DROP TRIGGER instance_states_readonly_is_final ON instance_states",
        final,
        readonly,
    ]
    noop = [
        "CREATE FUNCTION bench_noop() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$",
        "CREATE TRIGGER bench_noop AFTER INSERT OR UPDATE ON operations FOR EACH ROW "
        "EXECUTE FUNCTION bench_noop()",
        "CREATE TRIGGER bench_noop AFTER UPDATE ON workspaces FOR EACH ROW EXECUTE FUNCTION bench_noop()",
    ]
    # The ids the Runtime makes as they were before 15_ids.sql: random UUIDs (version 4) instead
    # of time-ordered ones, in every function that makes one.
    makers = conn.execute(
        "SELECT p.proname, pg_get_functiondef(p.oid) FROM pg_proc p "
        "WHERE p.pronamespace = 'public'::regnamespace AND p.proname <> 'uuid_v7' "
        "AND p.prosrc LIKE '%uuid_v7()%' ORDER BY 1"
    ).fetchall()
    assert makers, "no function makes a time-ordered id"
    random_ids = [str(definition).replace("uuid_v7()", "gen_random_uuid()") for _, definition in makers]
    time_ordered = [str(definition) for _, definition in makers]

    settle = conn.execute("SELECT pg_get_functiondef('settle_focusing'::regproc)").fetchone()
    assert settle is not None
    one_statement = _settle_in_one_statement()
    earlier = (
        [
            Part(
                "before: settle_focusing in one statement (the form of release 747472a)",
                "reshape",
                [one_statement],
                [str(settle[0])],
            )
        ]
        if one_statement
        else []
    )

    return [
        *earlier,
        Part(
            "server: wal_compression = lz4 (full-page images compressed)",
            "setting",
            [f"ALTER DATABASE {VARIANT} SET wal_compression = 'lz4'"],
            [f"ALTER DATABASE {VARIANT} RESET wal_compression"],
        ),
        Part(
            "before: random ids (UUID version 4) for instances, sub-sessions, operations, events",
            "reshape",
            random_ids,
            time_ordered,
        ),
        Part(
            "reshape: outbox fillfactor 90 (a claim can stay on its page)",
            "reshape",
            ["ALTER TABLE outbox SET (fillfactor = 90)"],
            ["ALTER TABLE outbox RESET (fillfactor)"],
        ),
        Part(
            "reshape: sub_sessions, instance_states fillfactor 90",
            "reshape",
            [
                "ALTER TABLE sub_sessions SET (fillfactor = 90)",
                "ALTER TABLE instance_states SET (fillfactor = 90)",
            ],
            ["ALTER TABLE sub_sessions RESET (fillfactor)", "ALTER TABLE instance_states RESET (fillfactor)"],
        ),
        Part("reshape: guard triggers called only for final rows (WHEN)", "reshape", guarded, unguarded),
        Part(
            "reshape: projection_events keyed by (conversation_id, event_seq) alone",
            "reshape",
            ["ALTER TABLE projection_events DROP CONSTRAINT pk_projection_events"],
            ["ALTER TABLE projection_events ADD CONSTRAINT pk_projection_events PRIMARY KEY (event_seq)"],
        ),
        Part(
            "probe: one no-op row trigger more on operations and workspaces",
            "probe",
            noop,
            [
                "DROP TRIGGER bench_noop ON operations",
                "DROP TRIGGER bench_noop ON workspaces",
                "DROP FUNCTION bench_noop()",
            ],
        ),
    ]


PREVIOUS_RELEASE = "747472aefc1f1acb27e84a2033d3034bc9c60819"
_PREVIOUS_SETTLE = "migrations/versions/2026_12_01_0100_0005_tool_calls_in_one_round_trip.py"


def _settle_in_one_statement() -> str | None:
    """settle_focusing as release 747472a wrote it — the operation, the instance's closing, the
    foreground, the sequence and the outbox row in one statement of data-modifying CTEs — read from
    git at that commit (None without it), with today's id function."""
    shown = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{PREVIOUS_RELEASE}:{_PREVIOUS_SETTLE}"],
        capture_output=True,
        text=True,
        check=False,
    )
    found = re.search(r'SETTLE_CTES = """(.*?)"""', shown.stdout, re.DOTALL)
    if shown.returncode != 0 or found is None:
        return None
    ctes = found.group(1).replace("gen_random_uuid()", "uuid_v7()")
    return f"""
CREATE OR REPLACE FUNCTION settle_focusing(
    p_operation_ids uuid[], p_state text, p_reason text, p_only_due boolean DEFAULT false)
RETURNS SETOF settled_operation
LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY
    WITH {ctes}
    SELECT s.operation_id, s.conversation_id, s.instance_id, s.state, s.reason, s.ends_at,
           s.finalized_at, s.lateness_ms, q.event_id
    FROM settled s JOIN queued q USING (operation_id);
END $$"""


if __name__ == "__main__":
    sys.exit(main())

"""The database's ceiling in ``bench.tool_cycles``: the service's own statement per Tool call,
written for pgbench and run by it on a fresh database."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path
from typing import Any

from bench.common import CpuMeter, tool_contexts
from bench.cycle_phases import ACTIVITY, DURATION_SECONDS, Phase, count_outbox_rows, transaction_counts
from harness.database import throwaway_database
from service.db.tool_calls import CALL_TOOL
from service.manifests import registry_of
from service.settings import Settings

PGBENCH = "/usr/bin/pgbench"


# --- (b) the database's ceiling: the service's own statement per Tool call ---------------------
# pgbench sends what the service sends — service.db.tool_calls.CALL_TOOL, the canonical
# call_tool_v3 with each Tool's canonical decision function — one statement and one round trip per
# call, so the ceiling always runs the current database code. What it leaves out is ours outside the
# database: Python, HTTP, the driver, the pool. (What the database code itself costs against the
# leanest SQL of the same writes is bench/capacity.py's question.) Written for pgbench: the only
# variable is the built-in client_id; a fixed fingerprint stands for the one Python computes.


DECIDE = {name: runner.decide for name, runner in registry_of(Settings()).runners.items()}


CONTEXTS = tool_contexts()


def _pgbench_call(tool: str, arguments: dict[str, Any]) -> str:
    def literal(value: str) -> str:
        return "'" + value.replace("'", "''") + "'"

    values = (
        "gen_random_uuid()::text",  # tool_call_id
        "'pgb-' || :client_id::text",  # conversation_id
        literal(tool),
        literal("0" * 64),  # fingerprint
        literal(json.dumps(arguments)) + "::jsonb",  # arguments
        literal(DECIDE[tool]),
        literal(CONTEXTS[tool]) + "::jsonb",  # context
    )
    # The statement's placeholders are Postgres' own ($1 ... $7).
    return re.sub(r"\$(\d+)", lambda m: values[int(m.group(1)) - 1], CALL_TOOL.decode().strip()) + ";"


START_SQL = _pgbench_call("pomodoro.start", {"duration_seconds": DURATION_SECONDS, "activity": ACTIVITY})
INTERRUPT_SQL = _pgbench_call("pomodoro.interrupt", {})


_PROCESSED = re.compile(r"number of transactions actually processed: (\d+)")
_TPS = re.compile(r"tps = ([0-9.]+) \(without initial connection time\)")
_STATEMENT = re.compile(r"^\s+([0-9.]+)\s+(?:\d+\s+)?SELECT ", re.MULTILINE)


def _with_notify(statement: str, channel: str) -> str:
    """The statement plus one NOTIFY, as the service's statements and triggers sent before the
    decision engine moved into SQL functions (at least one per tool call): shows what the
    cluster-wide NOTIFY commit lock costs. Not the baseline."""
    notifying, found = re.subn(
        r" FROM (call_tool_v\d+)\(", f", pg_notify('{channel}', '') FROM \\1(", statement, count=1
    )
    if not found:
        raise RuntimeError(f"no tool-call function in {statement!r}")
    return notifying


def run_pgbench(
    concurrency: int, seconds: int, work: Path, *, with_notify: bool = False
) -> tuple[Phase, float, list[float]]:
    """Returns the phase, pgbench's tps and the average latency of each statement (ms)."""
    script = work / "tool_cycle.sql"
    start, interrupt = START_SQL, INTERRUPT_SQL
    if with_notify:
        start, interrupt = _with_notify(start, "lineup_deadlines"), _with_notify(interrupt, "lineup_outbox")
    script.write_text(start.strip() + "\n\n" + interrupt.strip() + "\n")
    logs = work / "pgbench-logs"
    logs.mkdir(exist_ok=True)
    with throwaway_database("pgbench") as url:
        meter = CpuMeter(url)
        before = transaction_counts(url)
        meter.start()
        begun = time.perf_counter()
        completed = subprocess.run(
            [
                PGBENCH,
                "-n",
                "-M",
                "prepared",
                "-c",
                str(concurrency),
                "-j",
                "2",
                "-T",
                str(seconds),
                "-r",
                "-l",
                "--log-prefix",
                str(logs / "cycle"),
                "-f",
                str(script),
                url,
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        elapsed = time.perf_counter() - begun
        cpu = meter.stop()
        counts = transaction_counts(url)
        output = completed.stdout + completed.stderr
        if completed.returncode != 0:
            raise RuntimeError(f"pgbench failed ({completed.returncode}):\n{output}")
        processed = _PROCESSED.search(output)
        tps = _TPS.search(output)
        if processed is None or tps is None:
            raise RuntimeError(f"cannot read the pgbench output:\n{output}")
        phase = Phase(
            cycles=int(processed.group(1)), seconds=elapsed, cpu=cpu, backend_states=meter.backend_states
        )
        phase.counted(before, counts)
        phase.outbox_rows = count_outbox_rows(url)
        if with_notify:
            phase.notes.append("NOT THE BASELINE: each statement also NOTIFYs, as the old design did")
        if phase.outbox_rows != phase.cycles:
            phase.failures.append(f"outbox holds {phase.outbox_rows} rows after {phase.cycles} cycles")
    for log in logs.glob("cycle*"):
        for line in log.read_text().splitlines():
            parts = line.split()
            if len(parts) >= 3:
                phase.latencies.append(int(parts[2]) / 1e6)
    statements = [float(ms) for ms in _STATEMENT.findall(output)]
    return phase, float(tps.group(1)), statements

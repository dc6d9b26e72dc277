"""Pomodoro start+interrupt cycles per second: the HTTP Tool API beside the same writes in raw SQL.

    .venv/bin/python -m bench.tool_cycles [--seconds 10] [--concurrency 16] [--warmup 2]
        [--client lean|httpx] [--no-breakdown] [--no-sweeper] [--with-notify]

(a) HTTP: ``python -m service serve`` (default settings, so the default pool size) on a fresh
    database; ``--concurrency`` asyncio workers, each with its own conversation, loop
    ``POST /v1/tool-calls`` pomodoro.start (202 accepted) then pomodoro.interrupt (200 interrupted).
(b) Raw SQL: pgbench on the same server, another fresh database, ``-c`` = the HTTP concurrency,
    ``-j 2``; each Tool call is ONE statement (a data-modifying CTE), so a cycle is two round
    trips and two commits. Afterwards the outbox must hold exactly one row per cycle.
(c) Breakdown: the same cycles through the service's ``call_tool`` in this process (no HTTP, no
    sweeper), to split the gap between HTTP and the use case's SQL.

--no-sweeper is a diagnosis; --with-notify adds the raw figure with a NOTIFY per statement (not
the baseline).

Prints cycles/s of both, their ratio, HTTP cycle p50/p99 latency and where the CPU went.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg

from bench.common import CpuMeter, cpu_breakdown, event_loop, percentile, states_line, tool_poster
from service.db.tool_calls import CALL_TOOL
from service.tools import builtin
from tests.support.calls import interrupt_body, start_body
from tests.support.database import named_server, throwaway_database
from tests.support.http_client import HttpClient
from tests.support.processes import running_service

PGBENCH = "/usr/bin/pgbench"
DURATION_SECONDS = 1500  # far beyond the run: the sweeper never settles one of these
ACTIVITY = "bench"

# --- (b) the database's ceiling: the service's own statement per Tool call ---------------------
# pgbench sends what the service sends — service.db.tool_calls.CALL_TOOL, the canonical
# call_tool_v2 with each Tool's canonical decision function — one statement and one round trip per
# call, so the ceiling always runs the current database code. What it leaves out is ours outside the
# database: Python, HTTP, the driver, the pool. (What the database code itself costs against the
# leanest SQL of the same writes is bench/capacity.py's question.) Written for pgbench: the only
# variable is the built-in client_id; a fixed fingerprint stands for the one Python computes.


DECIDE = {registration.name: registration.decide for registration in builtin()}


def _contexts() -> dict[str, str]:
    """Each Tool's context exactly as the service passes it (its settings and the statuses of its
    outcomes), made by the service's own Runtime with default settings."""
    from service.manifests import load_registry
    from service.settings import load_settings
    from service.use_cases.runtime import Runtime

    settings = load_settings(
        "serve",
        database_url="postgresql://bench@127.0.0.1/unused",
        agent_token="bench-agent-token-000",
        host_token="bench-host-token-0000",
        operator_token="bench-operator-token",
    )
    runtime = Runtime(pool=None, settings=settings, registry=load_registry(settings.manifests_dir))  # type: ignore[arg-type]
    return {tool: runtime.context_of(tool) for tool in DECIDE}


CONTEXTS = _contexts()


def _pgbench_call(tool: str, arguments: dict[str, Any]) -> str:
    def literal(value: str) -> str:
        return "'" + value.replace("'", "''") + "'"

    return (
        CALL_TOOL.strip()
        % {
            "tool_call_id": "gen_random_uuid()::text",
            "conversation_id": "'pgb-' || :client_id::text",
            "tool": literal(tool),
            "fingerprint": literal("0" * 64),
            "arguments": literal(json.dumps(arguments)) + "::jsonb",
            "decide": literal(DECIDE[tool]),
            "context": literal(CONTEXTS[tool]) + "::jsonb",
        }
        + ";"
    )


START_SQL = _pgbench_call("pomodoro.start", {"duration_seconds": DURATION_SECONDS, "activity": ACTIVITY})
INTERRUPT_SQL = _pgbench_call("pomodoro.interrupt", {})


Answer = tuple[int, Any]
Caller = Callable[[dict[str, Any]], Awaitable[Answer]]


@dataclass
class Phase:
    """What one way of running the cycles measured."""

    cycles: int = 0
    seconds: float = 0.0
    warmup_cycles: int = 0
    latencies: list[float] = field(default_factory=list)
    start_latencies: list[float] = field(default_factory=list)
    interrupt_latencies: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    cpu: dict[str, float] = field(default_factory=dict)
    backend_states: Counter[str] = field(default_factory=Counter)
    commits: int = 0
    rollbacks: int = 0
    outbox_rows: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.cycles / self.seconds if self.seconds else 0.0


def _check(answer: Answer, status: int, expected: str) -> str | None:
    code, body = answer
    if code != status:
        return f"HTTP {code}: {json.dumps(body)[:300]}"
    if not isinstance(body, dict) or body.get("status") != expected:
        return f"status {body.get('status') if isinstance(body, dict) else body!r}, wanted {expected}"
    return None


async def _worker(
    call: Caller, worker: int, run: str, measure_from: float, stop_at: float, phase: Phase
) -> None:
    conversation = f"bench-{run}-{worker}"
    n = 0
    while True:
        began = time.perf_counter()
        if began >= stop_at or len(phase.failures) > 20:
            return
        base = f"{conversation}-{n}"
        n += 1
        try:
            started = await call(
                start_body(conversation, DURATION_SECONDS, ACTIVITY, tool_call_id=f"{base}-start")
            )
            middle = time.perf_counter()
            problem = _check(started, 202, "accepted")
            if problem is None:
                interrupted = await call(interrupt_body(conversation, tool_call_id=f"{base}-interrupt"))
                problem = _check(interrupted, 200, "interrupted")
        except (OSError, asyncio.IncompleteReadError, httpx.HTTPError) as exc:
            problem = f"transport error {exc!r}"
            middle = time.perf_counter()
        ended = time.perf_counter()
        if problem is not None:
            phase.failures.append(f"worker {worker} cycle {n}: {problem}")
            continue
        if measure_from <= ended <= stop_at:  # throughput = cycles completed inside the window
            phase.cycles += 1
            phase.latencies.append(ended - began)
            phase.start_latencies.append(middle - began)
            phase.interrupt_latencies.append(ended - middle)
        else:
            phase.warmup_cycles += 1  # completed during the warm-up or after the window


def _xacts(url: str) -> tuple[int, int]:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT xact_commit, xact_rollback FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()
    return (int(row[0]), int(row[1])) if row else (0, 0)


def _outbox_rows(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM outbox").fetchone()
    return int(row[0]) if row else 0


async def _drive(
    callers: list[Caller], seconds: float, warmup: float, url: str, service_pid: int | None
) -> Phase:
    """Run one worker per caller; measure the window after the warm-up."""
    phase = Phase(seconds=seconds)
    run = f"{time.time_ns():x}"
    measure_from = time.perf_counter() + warmup
    stop_at = measure_from + seconds
    meter = CpuMeter(url, service_pid)

    async def measure() -> None:
        await asyncio.sleep(max(0.0, measure_from - time.perf_counter()))
        before = await asyncio.to_thread(_xacts, url)
        await asyncio.to_thread(meter.start)
        await asyncio.sleep(max(0.0, stop_at - time.perf_counter()))
        phase.cpu = await asyncio.to_thread(meter.stop)
        phase.backend_states = meter.backend_states
        after = await asyncio.to_thread(_xacts, url)
        phase.commits, phase.rollbacks = after[0] - before[0], after[1] - before[1]

    await asyncio.gather(
        measure(), *(_worker(call, i, run, measure_from, stop_at, phase) for i, call in enumerate(callers))
    )
    return phase


def _finish(phase: Phase, url: str) -> Phase:
    phase.outbox_rows = _outbox_rows(url)
    total = phase.cycles + phase.warmup_cycles
    if not phase.failures and phase.outbox_rows != total:
        phase.failures.append(f"outbox holds {phase.outbox_rows} rows after {total} completed cycles")
    return phase


def _default_pool_size() -> int:
    from service.settings import Settings

    return int(Settings.model_fields["db_pool_size"].default)


def run_http(
    concurrency: int, seconds: float, warmup: float, log_dir: Path, client: str, serve_args: list[str]
) -> Phase:
    with throwaway_database("http") as url, running_service(url, log_dir, args=serve_args) as service:

        async def go() -> Phase:
            if client == "httpx":
                limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
                async with httpx.AsyncClient(
                    base_url=service.base_url, headers=service.agent_headers, limits=limits, timeout=30.0
                ) as http:

                    async def post(payload: dict[str, Any]) -> Answer:
                        answer = await http.post("/v1/tool-calls", json=payload)
                        return answer.status_code, answer.json()

                    return await _drive([post] * concurrency, seconds, warmup, url, service.pid)
            lean = [HttpClient(service.base_url, service.agent_token) for _ in range(concurrency)]
            try:
                return await _drive([tool_poster(c) for c in lean], seconds, warmup, url, service.pid)
            finally:
                for connection in lean:
                    await connection.close()

        with event_loop() as runner:
            phase = runner.run(go())
        phase.notes.append(
            f"service ready in {service.ready_in:.1f} s; default settings (DB pool size "
            f"{_default_pool_size()}) {' '.join(serve_args)}"
        )
        return _finish(phase, url)


def run_in_process(concurrency: int, seconds: float, warmup: float) -> Phase:
    """The same tool calls through the service's own use case (call_tool), without HTTP or sweeper."""
    from service.db.pool import open_pool
    from service.http import status_of_kind
    from service.manifests import load_registry
    from service.settings import load_settings
    from service.use_cases.runtime import Runtime
    from service.use_cases.tool_calls import ToolCallRequest, call_tool

    with throwaway_database("inproc") as url:
        settings = load_settings(
            "serve",
            database_url=url,
            agent_token="bench-agent-token-000",
            host_token="bench-host-token-0000",
            operator_token="bench-operator-token",
        )
        registry = load_registry(settings.manifests_dir)

        async def go() -> Phase:
            pool = await open_pool(settings.psycopg_url, size=settings.db_pool_size, name="bench-inproc")
            runtime = Runtime(pool=pool, settings=settings, registry=registry)

            async def call(payload: dict[str, Any]) -> Answer:
                answer = await call_tool(runtime, ToolCallRequest(**payload))
                return status_of_kind(answer.kind), json.loads(answer.body)

            try:
                return await _drive([call] * concurrency, seconds, warmup, url, None)
            finally:
                await pool.close()

        with event_loop() as runner:
            phase = runner.run(go())
        return _finish(phase, url)


_PROCESSED = re.compile(r"number of transactions actually processed: (\d+)")
_TPS = re.compile(r"tps = ([0-9.]+) \(without initial connection time\)")
_STATEMENT = re.compile(r"^\s+([0-9.]+)\s+(?:\d+\s+)?SELECT ", re.MULTILINE)


def _with_notify(statement: str, channel: str) -> str:
    """The statement plus one NOTIFY, as the service's statements and triggers sent before the
    decision engine moved into SQL functions (at least one per tool call): shows what the
    cluster-wide NOTIFY commit lock costs. Not the baseline."""
    return statement.replace("SELECT * FROM", f"SELECT *, pg_notify('{channel}', '') FROM", 1)


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
        before = _xacts(url)
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
        after = _xacts(url)
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
        phase.commits, phase.rollbacks = after[0] - before[0], after[1] - before[1]
        phase.outbox_rows = _outbox_rows(url)
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


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def _latency_line(label: str, values: list[float]) -> str:
    return (
        f"    {label:<18}p50 {_ms(percentile(values, 50))}   p99 {_ms(percentile(values, 99))}   "
        f"max {_ms(max(values, default=0.0))}"
    )


def _report(title: str, phase: Phase, rate: float) -> None:
    print(f"\n{title}")
    for note in phase.notes:
        print(f"    {note}")
    print(
        f"    cycles            {phase.cycles} in {phase.seconds:.1f} s"
        + (f" (+{phase.warmup_cycles} warm-up/edge cycles not counted)" if phase.warmup_cycles else "")
    )
    print(f"    cycles/s          {rate:.1f}   ({2 * rate:.1f} tool calls/s)")
    print(_latency_line("cycle latency", phase.latencies))
    if phase.start_latencies:
        print(_latency_line("  start call", phase.start_latencies))
        print(_latency_line("  interrupt call", phase.interrupt_latencies))
    if phase.cycles:
        print(
            f"    db xacts/cycle    {phase.commits / phase.cycles:.2f} commits, "
            f"{phase.rollbacks / phase.cycles:.2f} rollbacks"
        )
        print(
            f"    outbox rows       {phase.outbox_rows} "
            + ("(one per completed cycle: OK)" if not phase.failures else "")
        )
        print("    CPU in the measured window (us/cycle = CPU time per cycle):")
        print(cpu_breakdown(phase.cpu, phase.cycles, "cycle"))
        print(f"    db backends were  {states_line(phase.backend_states)}  (sampled every 0.1 s)")
    if phase.failures:
        print(f"    FAILED: {len(phase.failures)} problems, e.g. {phase.failures[0]}")


def main(argv: list[str] | None = None) -> int:
    from service.logging import configure_logging

    # The in-process phase logs like the service does (JSON on stderr), and only warnings.
    configure_logging(logging.WARNING)
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=int, default=10, help="length of each measured phase")
    parser.add_argument("--concurrency", type=int, default=16, help="HTTP workers = pgbench clients")
    parser.add_argument("--warmup", type=float, default=2.0, help="warm-up before measuring (not counted)")
    parser.add_argument("--client", choices=("lean", "httpx"), default="lean", help="the HTTP client")
    parser.add_argument(
        "--breakdown",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also run the use case in-process (no HTTP, no sweeper) to split the gap",
    )
    parser.add_argument(
        "--with-notify",
        action="store_true",
        help="also run the raw phase with one NOTIFY per statement (the design before migration 0005) "
        "and print its figure as a second line: what the cluster-wide NOTIFY commit lock costs",
    )
    parser.add_argument(
        "--no-sweeper",
        action="store_true",
        help="(diagnosis only) serve with --no-sweeper to see what the sweeper's wake-ups cost",
    )
    args = parser.parse_args(argv)
    if not 1 <= args.seconds <= 60 or not 1 <= args.concurrency <= 64 or not 0 <= args.warmup <= 10:
        parser.error("keep it bounded: --seconds 1..60, --concurrency 1..64, --warmup 0..10")

    print(
        f"tool_cycles: server {named_server().rsplit('@', 1)[-1]}, {os.cpu_count()} cores, "
        f"load average {os.getloadavg()[0]:.2f} at start, concurrency {args.concurrency}, "
        f"{args.seconds} s per phase, {time.strftime('%Y-%m-%d %H:%M:%S')}"
    )
    serve_args = ["--no-sweeper"] if args.no_sweeper else []
    with tempfile.TemporaryDirectory(prefix="bench-tool-cycles-") as tmp:
        work = Path(tmp)
        http = run_http(args.concurrency, args.seconds, args.warmup, work, args.client, serve_args)
        raw, raw_rate, statement_ms = run_pgbench(args.concurrency, args.seconds, work)
        notifying = (
            run_pgbench(args.concurrency, args.seconds, work, with_notify=True) if args.with_notify else None
        )
        inproc = run_in_process(args.concurrency, args.seconds, args.warmup) if args.breakdown else None

    _report(f"(a) HTTP Tool API through `python -m service serve` ({args.client} client)", http, http.rate)
    _report(
        "(b) raw SQL through pgbench, the ceiling: a statement per tool call, no NOTIFY (-M prepared, -j 2)",
        raw,
        raw_rate,
    )
    for label, ms in zip(("start statement", "interrupt stmt"), statement_ms, strict=False):
        print(f"    {label:<18}{ms:.2f} ms average (pgbench -r)")
    if notifying is not None:
        _report("(b') raw SQL with one NOTIFY per statement (not the baseline)", notifying[0], notifying[1])
    if inproc is not None:
        _report(
            "(c) breakdown: the service's call_tool in-process (same SQL, no HTTP, no sweeper)",
            inproc,
            inproc.rate,
        )

    ratio = http.rate / raw_rate if raw_rate else float("nan")
    print("\nsummary")
    print(f"    ratio HTTP / raw-SQL ceiling (no NOTIFY)  {ratio:.2f}   (aim >= 0.6, goal 0.8)")
    print(f"    HTTP cycles/s                             {http.rate:.1f}")
    print(f"    raw SQL cycles/s (the ceiling)            {raw_rate:.1f}")
    if notifying is not None and notifying[1]:
        print(
            f"    raw SQL with a NOTIFY per statement       {notifying[1]:.1f}   "
            f"(ratio HTTP / that: {http.rate / notifying[1]:.2f}; not the baseline)"
        )
    if inproc is not None and raw_rate:
        print(
            f"    in-process / ceiling                      {inproc.rate / raw_rate:.2f}   "
            "(the use case's SQL, without HTTP)"
        )
    print(_latency_line("HTTP cycle", http.latencies))
    failed = bool(
        http.failures
        or raw.failures
        or (inproc and inproc.failures)
        or (notifying and notifying[0].failures)
        or not raw.cycles
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

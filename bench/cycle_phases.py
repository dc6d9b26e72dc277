"""One way of running ``bench.tool_cycles``' start+interrupt cycles: what it measured (a
``Phase``), the workers that drive the cycles through a caller, and its report."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import psycopg

from bench.common import CpuMeter, cpu_breakdown, states_line
from harness.calls import interrupt_body, start_body
from harness.measure import percentile

DURATION_SECONDS = 1500  # far beyond the run: the sweeper never settles one of these
ACTIVITY = "bench"


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
    wal_flushes: int = 0  # the whole server's, in the window: the phases run one at a time
    outbox_rows: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.cycles / self.seconds if self.seconds else 0.0

    def counted(self, before: tuple[int, int, int], after: tuple[int, int, int]) -> None:
        """The commits, rollbacks and WAL flushes between two ``transaction_counts``."""
        self.commits, self.rollbacks, self.wal_flushes = (a - b for a, b in zip(after, before, strict=True))


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


def transaction_counts(url: str) -> tuple[int, int, int]:
    """This database's commits and rollbacks, and the server's WAL flushes (``fsync``s of the WAL:
    one flush makes every commit waiting for it durable, so flushes per commit show how many
    commits share one — Postgres' group commit)."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT xact_commit, xact_rollback, (SELECT wal_sync FROM pg_stat_wal)"
            " FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()
    return (int(row[0]), int(row[1]), int(row[2])) if row else (0, 0, 0)


def count_outbox_rows(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM outbox").fetchone()
    return int(row[0]) if row else 0


async def drive(
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
        before = await asyncio.to_thread(transaction_counts, url)
        await asyncio.to_thread(meter.start)
        await asyncio.sleep(max(0.0, stop_at - time.perf_counter()))
        phase.cpu = await asyncio.to_thread(meter.stop)
        phase.backend_states = meter.backend_states
        phase.counted(before, await asyncio.to_thread(transaction_counts, url))

    await asyncio.gather(
        measure(), *(_worker(call, i, run, measure_from, stop_at, phase) for i, call in enumerate(callers))
    )
    return phase


def finished(phase: Phase, url: str) -> Phase:
    phase.outbox_rows = count_outbox_rows(url)
    total = phase.cycles + phase.warmup_cycles
    if not phase.failures and phase.outbox_rows != total:
        phase.failures.append(f"outbox holds {phase.outbox_rows} rows after {total} completed cycles")
    return phase


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def latency_line(label: str, values: list[float]) -> str:
    return (
        f"    {label:<18}p50 {_ms(percentile(values, 50))}   p99 {_ms(percentile(values, 99))}   "
        f"max {_ms(max(values, default=0.0))}"
    )


def report(title: str, phase: Phase, rate: float) -> None:
    print(f"\n{title}")
    for note in phase.notes:
        print(f"    {note}")
    print(
        f"    cycles            {phase.cycles} in {phase.seconds:.1f} s"
        + (f" (+{phase.warmup_cycles} warm-up/edge cycles not counted)" if phase.warmup_cycles else "")
    )
    print(f"    cycles/s          {rate:.1f}   ({2 * rate:.1f} tool calls/s)")
    print(latency_line("cycle latency", phase.latencies))
    if phase.start_latencies:
        print(latency_line("  start call", phase.start_latencies))
        print(latency_line("  interrupt call", phase.interrupt_latencies))
    if phase.cycles:
        print(
            f"    db xacts/cycle    {phase.commits / phase.cycles:.2f} commits, "
            f"{phase.rollbacks / phase.cycles:.2f} rollbacks"
        )
        if phase.commits and phase.wal_flushes:
            print(
                f"    WAL flushes       {phase.wal_flushes / phase.commits:.2f} per commit "
                f"({phase.commits / phase.wal_flushes:.1f} commits share each flush; the server's)"
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

"""Scale-out on one machine: two ``serve`` processes behind one port and two relays, against one.

```
.venv/bin/python -m rigs.scale_out [--seconds 10] [--warmup 2] [--concurrency 16] [--races 200] [--rounds 3]
```

For 1, then 2 service processes (each ``python -m rigs.scale_out_serve``: the service on a port they all
share with ``SO_REUSEPORT``, plus one port of its own) and as many relays, on a fresh database of
the server named by ``DATABASE_URL`` (default the local one):

1. **Throughput**: ``--concurrency`` Agents loop ``pomodoro.start`` + ``pomodoro.interrupt`` cycles
   through the shared port for ``--seconds`` after ``--warmup``; cycles/s, cycle latency, and the
   results the relays delivered meanwhile to a receiving Agent in this process.
2. **Races**: ``--races`` Pomodoros of 2 s, each ended by four callers at once: the Agent's
   interrupt through process A and another through process B, the Host's leave through B and its
   close through A — half of them 0.5 s before the deadline, half within 20 ms of it, where both
   processes' sweepers compete too. Every operation must end exactly once, with one result
   delivered, and every answer must tell the same ending.

The throughput phase runs ``--rounds`` times for each count, alternating (the machine is shared:
the medians and the CPU the whole machine was busy are what to read); the races run in the first
round. Exits 1 when a race check fails (not for a figure).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import shutil
import statistics
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row

from harness.calls import interrupt_body, start_body
from harness.database import throwaway_database
from harness.http_client import HttpClient
from harness.measure import machine_busy, percentile, process_cpu
from harness.processes import RelayProcess, ServiceProcess, free_port
from harness.receiver import Receiver
from rigs.checks import settle
from rigs.stack import WEBHOOK_SECRET, relay


@dataclass
class Run:
    processes: int
    cycles: int = 0
    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)
    delivered_in_window: int = 0
    machine_cpu: float = 0.0  # busy CPU seconds of the whole machine in the window
    service_cpu: float = 0.0  # CPU seconds of the service processes in the window
    failures: list[str] = field(default_factory=list)
    outcomes: Counter[str] = field(default_factory=Counter)
    race_problems: list[str] = field(default_factory=list)
    races: int = 0

    @property
    def rate(self) -> float:
        return self.cycles / self.seconds if self.seconds else 0.0


class Launcher(ServiceProcess):
    """One service process on the shared port and on a private one (``port``), with the tokens of
    ``tokens``."""

    def __init__(self, database_url: str, log_dir: Path, shared_port: int, tokens: ServiceProcess) -> None:
        super().__init__(
            database_url, log_dir, env={"AGENT_TOKEN": tokens.agent_token, "HOST_TOKEN": tokens.host_token}
        )
        self.shared_port = shared_port

    def command(self) -> list[str]:
        return ["-m", "rigs.scale_out_serve", str(self.shared_port), str(self.port)]


async def _cycles(base_url: str, token: str, run: Run, measure_from: float, stop_at: float) -> None:
    http = HttpClient(base_url, token)
    conversation = f"scale-{secrets.token_hex(4)}"
    n = 0
    try:
        while time.monotonic() < stop_at and len(run.failures) < 20:
            began = time.monotonic()
            start = start_body(conversation, activity=None, tool_call_id=f"{conversation}-{n}-start")
            status, _, body = await http.post("/v1/tool-calls", start)
            if status != 202:
                run.failures.append(f"start: {status} {body[:200]!r}")
                continue
            answer = interrupt_body(conversation, tool_call_id=f"{conversation}-{n}-interrupt")
            status, _, body = await http.post("/v1/tool-calls", answer)
            if status != 200 or json.loads(body)["status"] != "interrupted":
                run.failures.append(f"interrupt: {status} {body[:200]!r}")
            n += 1
            done = time.monotonic()
            if measure_from <= done <= stop_at:
                run.cycles += 1
                run.latencies.append(done - began)
    finally:
        await http.close()


async def _post(base_url: str, token: str, path: str, payload: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    http = HttpClient(base_url, token)
    try:
        answer = await http.post(path, payload)
        return answer.status, answer.json() or {}
    finally:
        await http.close()


async def _race(a: Launcher, b: Launcher, n: int, answers: dict[str, dict[str, Any]]) -> None:
    conversation = f"race-{secrets.token_hex(3)}-{n}"
    status, started = await _post(
        a.base_url,
        a.agent_token,
        "/v1/tool-calls",
        start_body(conversation, 2, None, tool_call_id=f"{conversation}-start"),
    )
    if status != 202:
        answers[conversation] = {"error": f"start {status} {started}"}
        return
    ends_at = datetime.fromisoformat(started["operation"]["ends_at"].replace("Z", "+00:00")).timestamp()
    # Half the races among the four callers alone (0.5 s before the deadline), half at the deadline
    # itself (from 20 ms before it to 20 ms after), where the sweepers compete too.
    offset = -0.5 if n % 2 else (n % 5 - 2) * 0.01
    await asyncio.sleep(max(0.0, ends_at - time.time() + offset))
    instance = started["instance_id"]
    results = await asyncio.gather(
        _post(
            a.base_url,
            a.agent_token,
            "/v1/tool-calls",
            interrupt_body(conversation, tool_call_id=f"{conversation}-int-a"),
        ),
        _post(
            b.base_url,
            b.agent_token,
            "/v1/tool-calls",
            interrupt_body(conversation, tool_call_id=f"{conversation}-int-b"),
        ),
        _post(
            b.base_url,
            b.host_token,
            f"/v1/host/conversations/{conversation}/workspace/foreground",
            {"target": "interact"},
        ),
        _post(a.base_url, a.host_token, f"/v1/host/instances/{instance}/close", {}),
    )
    answers[conversation] = {
        "operation_id": started["operation"]["operation_id"],
        "start_id": f"{conversation}-start",
        "interrupts": [results[0], results[1]],
        "leave": results[2],
        "close": results[3],
    }


def _check_races(url: str, answers: dict[str, dict[str, Any]], run: Run) -> None:
    with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
        operations = {
            str(r["operation_id"]): r
            for r in conn.execute("SELECT operation_id, state, reason, ends_at, finalized_at FROM operations")
        }
        outbox = Counter(
            r["operation_id"]
            for r in conn.execute(
                "SELECT operation_id::text AS operation_id FROM outbox WHERE status = 'delivered'"
            )
        )
    for conversation, race in answers.items():
        run.races += 1
        if "error" in race:
            run.race_problems.append(f"{conversation}: {race['error']}")
            continue
        op = operations.get(race["operation_id"])
        if op is None or op["state"] == "focusing":
            run.race_problems.append(f"{conversation}: not final")
            continue
        state = op["state"]
        run.outcomes[f"{state}/{op['reason']}"] += 1
        problems = []
        if outbox[race["operation_id"]] != 1:
            problems.append(f"{outbox[race['operation_id']]} delivered results")
        won = [
            body
            for status, body in race["interrupts"]
            if status == 200 and body.get("status") == "interrupted"
        ]
        if len(won) != (1 if (state, op["reason"]) == ("interrupted", "agent_interrupt") else 0):
            problems.append(f"{len(won)} interrupts answered interrupted, state {state}/{op['reason']}")
        for status, body in race["interrupts"]:
            if status != 200:
                problems.append(f"interrupt answered {status}")
            elif body.get("status") == "operation_already_final" and body.get("final_state") != state:
                problems.append(f"an interrupt was told {body.get('final_state')}, the state is {state}")
        status, closed = race["close"]
        if status != 200 or (closed.get("operation") or {}).get("state") != state:
            problems.append(f"the close was told {status} {closed.get('operation')}, the state is {state}")
        if race["leave"][0] != 200:
            problems.append(f"leave answered {race['leave'][0]}")
        if state == "completed" and op["finalized_at"] < op["ends_at"]:
            problems.append("completed before its deadline")
        run.race_problems.extend(f"{conversation}: {p}" for p in problems)


async def _phase(processes: int, args: argparse.Namespace, log_dir: Path, races: int) -> Run:
    run = Run(processes)
    shared_port = free_port()
    async with Receiver([WEBHOOK_SECRET]) as receiver:
        with throwaway_database(f"scale_{processes}") as url:
            tokens = ServiceProcess(url, log_dir)
            services = [Launcher(url, log_dir, shared_port, tokens) for _ in range(processes)]
            relays = [
                relay(url, receiver.url, log_dir, f"scale-{processes}-relay-{n}") for n in range(processes)
            ]
            try:
                for service in services:
                    service.start()
                for service in services:
                    await asyncio.to_thread(service.wait_ready)
                for process in relays:
                    process.start()
                await _throughput(run, args, services, receiver, f"http://127.0.0.1:{shared_port}")
                await _races(run, services, url, races)
            finally:
                # In a thread: the receiver on this loop answers while the relays finish.
                await asyncio.to_thread(_stop, [*relays, *services])
    return run


async def _throughput(
    run: Run, args: argparse.Namespace, services: list[Launcher], receiver: Receiver, shared_url: str
) -> None:
    """``--concurrency`` Agents through the shared port for ``--seconds`` after ``--warmup``."""
    began = time.monotonic()
    measure_from, stop_at = began + args.warmup, began + args.warmup + args.seconds

    def service_cpu() -> float:
        return sum(process_cpu(s.pid) for s in services)

    async def count_deliveries() -> None:
        await asyncio.sleep(max(0.0, measure_from - time.monotonic()))
        before = len(receiver.accepted())
        machine, ours = machine_busy(), service_cpu()
        await asyncio.sleep(max(0.0, stop_at - time.monotonic()))
        run.delivered_in_window = len(receiver.accepted()) - before
        run.machine_cpu, run.service_cpu = machine_busy() - machine, service_cpu() - ours

    token = services[0].agent_token
    await asyncio.gather(
        count_deliveries(),
        *(_cycles(shared_url, token, run, measure_from, stop_at) for _ in range(args.concurrency)),
    )
    run.seconds = args.seconds


async def _races(run: Run, services: list[Launcher], url: str, races: int) -> None:
    """``races`` Pomodoros, each ended by four callers at once through the first and the last process."""
    answers: dict[str, dict[str, Any]] = {}
    limit = asyncio.Semaphore(25)

    async def one(n: int) -> None:
        async with limit:
            await _race(services[0], services[-1], n, answers)

    await asyncio.gather(*(one(n) for n in range(races)))
    left = await settle(url, within=60)
    if left != {"focusing": 0, "undelivered": 0}:
        run.race_problems.append(f"not settled: {left}")
    _check_races(url, answers, run)


def _stop(processes: list[Launcher | RelayProcess]) -> None:
    for process in processes:
        with contextlib.suppress(Exception):
            process.stop()


def _report(runs: list[Run]) -> None:
    cores = os.cpu_count() or 1
    print(f"\nthroughput ({cores} cores; start+interrupt cycles through the shared port):")
    for n, run in enumerate(runs):
        p50, p99 = (percentile(run.latencies, q) * 1000 for q in (50, 99))
        label = f"round {n // 2 + 1}, {run.processes} process{'es' if run.processes > 1 else '  '}"
        delivered = run.delivered_in_window / run.seconds
        busy = run.machine_cpu / run.seconds / cores
        service = run.service_cpu / max(run.cycles, 1) * 1e6
        print(
            f"  {label}: {run.rate:6.1f} cycles/s, p50 {p50:5.1f} / p99 {p99:5.1f} ms, relays delivered"
            f" {delivered:6.1f}/s, machine busy {busy:4.0%}, service CPU {service:5.0f} us/cycle"
        )
    print("races (4 callers across both processes + every sweeper, per Pomodoro):")
    for run in runs:
        if run.races:
            print(
                f"  {run.processes} process(es): {run.races} races, {len(run.race_problems)} problems;"
                f" outcomes {dict(sorted(run.outcomes.items()))}"
            )
    one = statistics.median(r.rate for r in runs if r.processes == 1)
    two = statistics.median(r.rate for r in runs if r.processes == 2)
    print(f"\nmedian cycles/s: 1 process {one:.1f}, 2 processes {two:.1f}; ratio 2 / 1: {two / one:.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--races", type=int, default=200, help="races per process count, in the first round")
    parser.add_argument("--rounds", type=int, default=3, help="1 then 2 processes, this many times (3)")
    args = parser.parse_args()
    log_dir = Path(f"/tmp/lineup-scale-out-{secrets.token_hex(3)}")
    log_dir.mkdir()
    runs = [
        asyncio.run(_phase(n, args, log_dir, args.races if r == 0 else 0))
        for r in range(args.rounds)
        for n in (1, 2)
    ]
    _report(runs)
    problems = [p for run in runs for p in run.failures + run.race_problems]
    for problem in problems[:20]:
        print(f"  FAIL {problem}")
    if problems:
        print(f"FAILED (logs in {log_dir})")
        return 1
    print("every race ended exactly once, as every answer said, with 1 and with 2 processes")
    shutil.rmtree(log_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

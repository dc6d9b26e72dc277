"""Tool calls per second and database CPU per tool call: one PostgreSQL against a Citus cluster (a
coordinator and two workers), both on this machine, in the same run.

    .venv/bin/python -m bench.citus_cost [--cycles 400] [--concurrency 8]

Each setup gets servers of its own (``initdb`` under a temp dir, the same settings; for Citus the
extension installed as ``make citus`` installs it), ``migrate`` (and ``distribute``), and one
``python -m service serve``. Then ``--concurrency`` Agents run ``--cycles`` start+interrupt cycles
between them over HTTP, each cycle in a conversation of its own, after a warm-up. Measured over that
window: tool calls per second (wall time: the machine's other load moves it), and CPU from
``/proc`` — of every process of every node (backends, Citus's own, background) and of the service
— per tool call. No relay runs: the window is the tool calls alone.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import secrets
import shutil
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import psycopg

from bench.common import process_cpu
from bench.measured_server import ServerCpu, postmaster_pid
from harness.calls import interrupt_body, start_body
from harness.citus import Cluster, citus_cluster, installed
from harness.postgres import Postgres, workdir
from harness.processes import ServiceProcess
from rigs.stack import migrate
from service.db.distribute import distribute

WARM_CYCLES = 40
DATABASE = "lineup"


@dataclass
class Figures:
    setup: str
    calls: int
    seconds: float
    database_cpu: float  # every process of every node
    backends_cpu: float  # the backends of the measured database only
    service_cpu: float
    first_node_cpu: float  # the one PostgreSQL, or Citus's coordinator: every process of it

    @property
    def per_second(self) -> float:
        return self.calls / self.seconds

    def per_call_ms(self, cpu: float) -> float:
        return 1000 * cpu / self.calls


async def _cycles(base_url: str, token: str, count: int, concurrency: int, run: str) -> int:
    """``count`` start+interrupt cycles over ``concurrency`` Agents; the tool calls answered."""
    queue: asyncio.Queue[int] = asyncio.Queue()
    for n in range(count):
        queue.put_nowait(n)
    answered = 0

    async def agent() -> None:
        nonlocal answered
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=30) as client:
            while not queue.empty():
                n = queue.get_nowait()
                conversation = f"bench-{run}-{n}"
                started = await client.post("/v1/tool-calls", json=start_body(conversation, 1500))
                stopped = await client.post("/v1/tool-calls", json=interrupt_body(conversation))
                if started.status_code != 202 or stopped.status_code != 200:
                    raise RuntimeError(f"{conversation}: {started.status_code} {stopped.status_code}")
                answered += 2

    await asyncio.gather(*(agent() for _ in range(concurrency)))
    return answered


def measure(setup: str, url: str, nodes: list[Postgres], cycles: int, concurrency: int, log: Path) -> Figures:
    service = ServiceProcess(url, log)
    service.start_ready()
    try:
        asyncio.run(_cycles(service.base_url, service.agent_token, WARM_CYCLES, concurrency, "warm"))
        meters = [ServerCpu(postmaster_pid(node.data), DATABASE) for node in nodes]
        for meter in meters:
            meter.begin()
        service_before = process_cpu(service.pid)
        began = time.monotonic()
        calls = asyncio.run(
            _cycles(service.base_url, service.agent_token, cycles, concurrency, secrets.token_hex(3))
        )
        seconds = time.monotonic() - began
        service_cpu = process_cpu(service.pid) - service_before
        spent = [meter.finish() for meter in meters]
    finally:
        service.stop()
    return Figures(
        setup,
        calls,
        seconds,
        sum(sum(kinds.values()) for kinds in spent),
        sum(kinds.get("backends", 0.0) for kinds in spent),
        service_cpu,
        sum(spent[0].values()),
    )


@contextlib.contextmanager
def one_primary() -> Iterator[tuple[str, list[Postgres]]]:
    node = Postgres(workdir("lineup-bench-primary-")).init()
    node.start()
    try:
        with psycopg.connect(node.admin_url, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {DATABASE}")
        yield node.url(DATABASE), [node]
    finally:
        node.stop()
        shutil.rmtree(node.root, ignore_errors=True)


@contextlib.contextmanager
def cluster() -> Iterator[tuple[str, list[Postgres], Cluster]]:
    with citus_cluster(workers=2, database=DATABASE) as found:
        yield found.url(), found.nodes, found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=400)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    if not installed():
        print("needs the citus extension installed (make citus builds and installs it)")
        return 2
    log = workdir("lineup-bench-citus-logs-")
    results = []
    with one_primary() as (url, nodes):
        migrate(url, log)
        results.append(measure("one PostgreSQL", url, nodes, args.cycles, args.concurrency, log))
    with cluster() as (url, nodes, _):
        migrate(url, log)
        with psycopg.connect(url, autocommit=True) as conn:
            distribute(conn)
        results.append(
            measure("Citus: coordinator + 2 workers", url, nodes, args.cycles, args.concurrency, log)
        )
    shutil.rmtree(log, ignore_errors=True)
    print(f"tool calls: {args.cycles} start+interrupt cycles, {args.concurrency} Agents, one serve, no relay")
    print(
        f"{'setup':34} {'calls/s':>8} {'DB CPU ms/call':>15} {'coordinator ms/call':>20}"
        f" {'backends ms/call':>17} {'serve ms/call':>14}"
    )
    for r in results:
        coordinator = f"{r.per_call_ms(r.first_node_cpu):>20.2f}" if r is not results[0] else f"{'':>20}"
        print(
            f"{r.setup:34} {r.per_second:>8.1f} {r.per_call_ms(r.database_cpu):>15.2f} {coordinator}"
            f" {r.per_call_ms(r.backends_cpu):>17.2f} {r.per_call_ms(r.service_cpu):>14.2f}"
        )
    base, citus = results
    print(
        f"ratio Citus / one PostgreSQL:      {citus.per_second / base.per_second:>8.2f}"
        f" {citus.database_cpu / citus.calls / (base.database_cpu / base.calls):>15.2f}"
    )

    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Shared pieces of the benchmarks: the database code's text, statistics, CPU.

The throwaway databases, the processes, the HTTP client and the receiving Agent are the harness's
(``harness``): the benches, the rigs and the tests share one of each.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import subprocess
import sys
import tempfile
import threading
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from harness.http_client import HttpClient
from harness.measure import machine_busy, process_cpu
from harness.processes import ROOT, RelayProcess, free_port
from harness.receiver import new_secret
from harness.releases import release_env


def canonical_text(name: str) -> str:
    """The current text of a function, trigger, type or view of the database code (its one source,
    service/db/sql/): the benches build on the very text the database runs, never on a copy."""
    from service.db.code import SOURCE, definitions
    from service.manifests import registry_of
    from service.settings import Settings

    return next(d.sql for d in definitions(SOURCE, registry_of(Settings()).folders) if d.name == name)


def tool_contexts() -> dict[str, str]:
    """Each shipped Tool's context (``p_context``) exactly as the service passes it — its settings
    and the status of each of its outcomes —, made by the service's own Runtime (without a pool)
    with default settings: the benches that send ``call_tool_v3`` themselves send what it sends."""
    from service.manifests import registry_of
    from service.settings import load_settings
    from service.use_cases.runtime import Runtime

    settings = load_settings(
        "serve",
        database_url="postgresql://bench@127.0.0.1/unused",
        agent_token="bench-agent-token-000",
        host_token="bench-host-token-0000",
        operator_token="bench-operator-token",
    )
    registry = registry_of(settings)
    runtime = Runtime(pool=None, settings=settings, registry=registry)  # type: ignore[arg-type]
    return {tool: runtime.context_of(tool) for tool in registry.runners}


ToolCaller = Callable[[dict[str, Any]], Awaitable[tuple[int, Any]]]


def tool_poster(client: HttpClient) -> ToolCaller:
    """Tool calls through ``POST /v1/tool-calls`` on ``client``: the status and the JSON answer."""

    async def post(payload: dict[str, Any]) -> tuple[int, Any]:
        answer = await client.post("/v1/tool-calls", payload)
        return answer.status, answer.json()

    return post


def event_loop() -> asyncio.Runner:
    """A runner on uvloop, as the service runs: the client's share of the CPU stays small."""
    import uvloop

    return asyncio.Runner(loop_factory=uvloop.new_event_loop)


class BackendCpu(threading.Thread):
    """Polls the backends serving one database: their CPU (/proc) and what they are doing.

    Connections that live through the whole phase are counted exactly; one that exits early loses
    at most the last poll interval. The poller's own backend is left out. Each poll also notes, per
    backend, its wait event (``CPU`` when active and not waiting), or ``idle in transaction`` (the
    transaction is open and waiting for its client), or ``idle``.
    """

    def __init__(self, url: str, interval: float = 0.1) -> None:
        super().__init__(name="backend-cpu", daemon=True)
        self._url = url
        self._interval = interval
        self._halt = threading.Event()
        self._first: dict[int, float] = {}
        self._last: dict[int, float] = {}
        self._ready = threading.Event()
        self.states: Counter[str] = Counter()
        self.error: str | None = None

    def _poll(self, conn: psycopg.Connection[Any], initial: bool) -> None:
        rows = conn.execute(
            "SELECT pid, state, wait_event_type, wait_event FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid() "
            "AND backend_type = 'client backend'"
        ).fetchall()
        for pid, state, wait_type, wait in rows:
            cpu = process_cpu(int(pid))
            if pid not in self._first:
                self._first[pid] = cpu if initial else 0.0
            self._last[pid] = max(cpu, self._last.get(pid, 0.0))
            if initial:
                continue
            if state == "active":
                self.states[f"{wait_type}:{wait}" if wait_type else "active on CPU"] += 1
            elif state == "idle in transaction":
                self.states["idle in transaction (waits for its client)"] += 1
            else:
                self.states[str(state)] += 1

    def run(self) -> None:
        try:
            with psycopg.connect(self._url, autocommit=True, application_name="bench-cpu") as conn:
                self._poll(conn, initial=True)
                self._ready.set()
                while not self._halt.wait(self._interval):
                    self._poll(conn, initial=False)
                self._poll(conn, initial=False)
        except Exception as exc:
            self.error = repr(exc)
        finally:
            self._ready.set()

    def begin(self) -> None:
        self.start()
        self._ready.wait(10)

    def finish(self) -> float:
        self._halt.set()
        self.join(10)
        return sum(self._last[pid] - self._first[pid] for pid in self._last)


@dataclass
class CpuMeter:
    """CPU seconds spent during a phase by the parts that matter for a bench.

    ``postgres (this db)`` is the backends serving the bench's database (not the WAL writer or
    the checkpointer); ``machine`` is every core of the machine, so ``machine`` minus the named
    parts is what everything else did (other databases, other processes) meanwhile.
    """

    url: str
    service_pid: int | None = None
    marks: dict[str, float] = field(default_factory=dict)
    backend_states: Counter[str] = field(default_factory=Counter)
    _backends: BackendCpu | None = None

    def _sample(self) -> dict[str, float]:
        usage_self = os.times()
        sample = {
            "machine": machine_busy(),
            "bench process": usage_self.user + usage_self.system,
            "pgbench": usage_self.children_user + usage_self.children_system,
        }
        if self.service_pid is not None:
            sample["service"] = process_cpu(self.service_pid)
        return sample

    def start(self) -> None:
        self._backends = BackendCpu(self.url)
        self._backends.begin()
        self.marks = self._sample()

    def stop(self) -> dict[str, float]:
        end = self._sample()
        spent = {key: end[key] - self.marks.get(key, 0.0) for key in end}
        if self._backends is not None:
            spent["postgres (this db)"] = self._backends.finish()
            self.backend_states = self._backends.states
        named = sum(v for k, v in spent.items() if k != "machine")
        spent["everything else"] = max(0.0, spent["machine"] - named)
        return spent


def cpu_breakdown(spent: Mapping[str, float], units: int, unit: str) -> str:
    """One line per part: CPU seconds and CPU microseconds per unit of work."""
    lines = []
    for key in ("service", "postgres (this db)", "bench process", "pgbench", "everything else", "machine"):
        if key in spent and (key != "pgbench" or spent[key] > 0):
            per = spent[key] / units * 1e6 if units else float("nan")
            lines.append(f"    {key:<20} {spent[key]:6.2f} s CPU   {per:8.0f} us/{unit}")
    return "\n".join(lines)


def states_line(states: Counter[str], top: int = 4) -> str:
    """The most frequent backend states, as shares of all samples."""
    total = sum(states.values())
    if not total:
        return "(no samples)"
    return ", ".join(f"{name} {count / total:.0%}" for name, count in states.most_common(top))


class Relays:
    """``count`` ``python -m relay`` processes delivering to ``webhook_url``, started and ready (their
    ``/readyz`` answers) before this returns."""

    def __init__(
        self,
        url: str,
        webhook_url: str,
        count: int,
        logs: Path | None = None,
        *,
        concurrency: int = 64,
        batch: int = 100,
        env: Mapping[str, str] | None = None,
        tree: Path | None = None,
    ) -> None:
        """``tree``: run another release's relay, checked out there (``harness.releases``)."""
        logs = logs or Path(tempfile.mkdtemp(prefix="bench-relays-"))
        secret = new_secret()
        release = {} if tree is None else release_env(tree)
        self.processes: list[RelayProcess] = []
        for n in range(count):
            probe = free_port()
            relay = RelayProcess(
                url,
                webhook_url,
                secret,
                logs / f"relay-{n}-{probe}.log",
                {
                    "RELAY_METRICS_HOST": "127.0.0.1",
                    "RELAY_METRICS_PORT": str(probe),
                    "RELAY_CONCURRENCY": str(concurrency),
                    "RELAY_BATCH_SIZE": str(batch),
                    **release,
                    **(env or {}),
                },
                cwd=tree or ROOT,
            )
            self.processes.append(relay)
            relay.start()
            try:
                relay.wait_ready()
            except BaseException:
                self.stop()
                raise

    def cpu(self) -> float:
        """CPU seconds the relays have used."""
        return sum(process_cpu(relay.pid) for relay in self.processes)

    def stop(self) -> None:
        codes = [relay.stop() for relay in self.processes]
        if any(code not in (0, None) for code in codes):
            raise SystemExit(f"relays exited with {codes}")


def callgrind_total(script: Path, args: Sequence[str], tree: Path, work: Path, env: Mapping[str, str]) -> int:
    """The instructions ``python script args`` executes under callgrind, run in ``tree`` with only
    that tree's code importable (``PYTHONPATH``; a previous release's checkout, or this one) and
    ``env`` added; the script prints nothing the count needs: callgrind's own summary line is read."""
    out = work / f"callgrind-{uuid.uuid4().hex[:8]}.out"
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, str(script), *args],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree), **env},
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the driver {list(args[:1])} failed in {tree}:\n{done.stderr[-3000:]}")
    for line in out.read_text().splitlines():
        if line.startswith("summary:"):
            out.unlink()
            return int(line.split()[1])
    raise RuntimeError(f"no summary in {out}")


def add_pg_settings(parser: argparse.ArgumentParser) -> None:
    """``--pg-setting NAME=VALUE`` (repeatable): the bench runs on a Postgres of its own with them."""
    parser.add_argument(
        "--pg-setting",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="run on a Postgres server of the bench's own (this machine's disk, fsync and synchronous "
        "commit on) with this setting in postgresql.conf, e.g. commit_delay=50; repeatable",
    )


@contextlib.contextmanager
def bench_server(pg_settings: Sequence[str]) -> Iterator[str]:
    """The server the bench makes its databases on: without settings, ``named_server()``; with
    ``NAME=VALUE`` settings, a Postgres of its own started with them (its WAL on this machine's
    disk, so a commit waits for a real flush) and named by ``DATABASE_URL`` while the bench runs,
    so that a figure taken with server settings can be taken again."""
    from harness.database import MIGRATED_TEMPLATE, named_server
    from harness.postgres import own_postgres

    if not pg_settings:
        yield named_server()
        return
    settings = dict(item.split("=", 1) for item in pg_settings)
    with own_postgres(settings, prefix="lineup-bench-") as server:
        before = {name: os.environ.pop(name, None) for name in ("DATABASE_URL", MIGRATED_TEMPLATE)}
        os.environ["DATABASE_URL"] = server.admin_url
        try:
            yield server.admin_url
        finally:
            os.environ.pop("DATABASE_URL", None)
            os.environ.update({name: value for name, value in before.items() if value is not None})

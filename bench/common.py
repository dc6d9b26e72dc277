"""Shared pieces of the benchmarks: throwaway databases, the service process, statistics, CPU.

Everything here talks to 127.0.0.1 only: the Postgres server named by ``DATABASE_URL`` (or the
local default) and the ``python -m service serve`` process the bench starts itself.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import psycopg
from psycopg import sql

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from service.db.migrate import upgrade  # noqa: E402

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/postgres"

# Settings the service would otherwise inherit from the caller's environment; the bench runs the
# service with its defaults unless it says otherwise.
_SERVICE_SETTINGS = (
    "DB_POOL_SIZE",
    "DATABASE_URL",
    "AGENT_TOKEN",
    "HOST_TOKEN",
    "OPERATOR_TOKEN",
    "MANIFESTS_DIR",
    "INTERRUPT_LATE_WINDOW_SECONDS",
    "REQUEST_MAX_BODY_BYTES",
)


def server_url() -> str:
    """The Postgres server to benchmark: ``DATABASE_URL`` or the local default."""
    url = os.environ.get("DATABASE_URL") or DEFAULT_URL
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


def with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


@contextlib.contextmanager
def throwaway_database(name: str) -> Iterator[str]:
    """``CREATE DATABASE bench_<name>_<random>``, migrated to head; dropped ``WITH (FORCE)`` after."""
    admin = server_url()
    database = f"bench_{name}_{secrets.token_hex(4)}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
    try:
        url = with_database(admin, database)
        upgrade(url)
        yield url
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database)))


def canonical_text(name: str) -> str:
    """The current text of a function, trigger, type or view of the database code (its one source,
    service/db/sql/): the benches build on the very text the database runs, never on a copy."""
    from service.db.code import definitions

    return next(d.sql for d in definitions() if d.name == name)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Service:
    """A running ``python -m service serve``."""

    process: subprocess.Popen[bytes]
    base_url: str
    agent_token: str
    log: Path
    started_in: float = 0.0

    @property
    def agent_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.agent_token}"}

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def _wait_ready(service: Service, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    last = "no answer"
    while time.monotonic() < deadline:
        if service.process.poll() is not None:
            raise RuntimeError(
                f"the service exited with {service.process.returncode} before it was ready; "
                f"log {service.log}:\n{service.log_tail()}"
            )
        try:
            answer = httpx.get(f"{service.base_url}/readyz", timeout=1.0)
            if answer.status_code == 200:
                return
            last = f"{answer.status_code} {answer.text[:200]}"
        except httpx.HTTPError as exc:
            last = repr(exc)
        time.sleep(0.05)
    raise TimeoutError(f"the service was not ready within {timeout}s ({last}); log {service.log}")


def stop_service(service: Service, timeout: float = 20.0) -> int:
    process = service.process
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return process.returncode


@contextlib.contextmanager
def running_service(
    database_url: str,
    log_dir: Path,
    *,
    env: Mapping[str, str] | None = None,
    args: Sequence[str] = (),
    timeout: float = 60.0,
) -> Iterator[Service]:
    """``python -m service serve`` on a free port of 127.0.0.1, ready (``/readyz`` 200) on entry."""
    port = free_port()
    agent_token = "bench-agent-" + secrets.token_hex(16)
    full_env = {k: v for k, v in os.environ.items() if k not in _SERVICE_SETTINGS}
    full_env.update(
        {
            "DATABASE_URL": database_url,
            "AGENT_TOKEN": agent_token,
            "HOST_TOKEN": "bench-host-" + secrets.token_hex(16),
            "OPERATOR_TOKEN": "bench-operator-" + secrets.token_hex(16),
            **(env or {}),
        }
    )
    log = log_dir / f"service-{port}.log"
    started = time.monotonic()
    with log.open("ab") as handle:
        process = subprocess.Popen(
            [sys.executable, "-m", "service", "serve", "--host", "127.0.0.1", "--port", str(port), *args],
            cwd=ROOT,
            env=full_env,
            stdout=handle,
            stderr=subprocess.STDOUT,
        )
    service = Service(process, f"http://127.0.0.1:{port}", agent_token, log)
    try:
        _wait_ready(service, timeout)
        service.started_in = time.monotonic() - started
        yield service
    finally:
        code = stop_service(service)
        if code not in (0, -signal.SIGTERM):
            print(f"warning: the service exited with {code}; log {log}", file=sys.stderr)


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) with linear interpolation between closest ranks."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    if len(ordered) == 1:
        return float(ordered[0])
    rank = (len(ordered) - 1) * q / 100.0
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return float(ordered[low] + (ordered[high] - ordered[low]) * (rank - low))


# --- CPU accounting (Linux /proc), to say where the time of a phase went ---------------------------

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _proc_stat(pid: int) -> list[str] | None:
    """Fields of /proc/<pid>/stat from the state field on (index 0 = field 3 of proc(5))."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw[raw.rindex(")") + 2 :].split()


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system) a process has used; 0 if it is gone."""
    fields = _proc_stat(pid)
    if fields is None:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICKS


def machine_busy() -> float:
    """Busy CPU seconds of the whole machine (all cores) since boot."""
    first = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    values = [int(v) for v in first]
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return (sum(values[:8]) - idle) / _TICKS


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

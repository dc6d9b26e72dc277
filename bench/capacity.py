"""What one unit of work costs the database, with the service's own CPU beside it.

    .venv/bin/python -m bench.capacity [--units 1000] [--concurrency 8] [--watched-cycles 200]
        [--refreshes 30] [--pad 50000] [--json FILE]

A Postgres of its own (``initdb`` under a temp dir, fsync and synchronous commit on, with
``pg_stat_statements`` preloaded and ``pg_walinspect``), one ``python -m service serve`` on it, and
for each unit of work a measured window in which ``--units`` of them run (``--concurrency`` HTTP
workers, each with conversations of its own):

    pomodoro.start            202 accepted, in a conversation whose workspace exists
    refusal                   pomodoro.start while one focuses: 409 operation_already_focusing (recorded)
    pomodoro.interrupt        200 interrupted
    replay                    the same interrupt again: the recorded answer, byte for byte
    invalid arguments         422 (nothing recorded)
    interact.ask              202 accepted
    answer                    POST /v1/host/interactions/{id}/answer
    deadline (sweeper)        a focus period reaching ends_at, settled by the service's sweeper
    relay delivery            one outbox row delivered by ``python -m relay`` to a local receiver
    event stream, watched     one conversation watched over SSE: what watching adds per start+interrupt
    console refresh           GET /v1/ops/overview, at the run's table sizes and after --pad more rows
    gauge sample              the outbox and focusing gauges' statements (each process, every 15 s)

Per unit: CPU of the service process and of Postgres (its backends, and its background processes:
walwriter, checkpointer, autovacuum) from /proc; statements (round trips, every connection);
write transactions (commit records); WAL bytes (``pg_current_wal_insert_lsn`` deltas) and the part
that is full-page images; rows and index entries written, read from the WAL records; buffers
dirtied (``pg_stat_statements``). CPU per unit of work is robust to other load on the machine;
nothing here is a timed figure.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import secrets
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg

from bench.common import Relays
from bench.seeds import HISTORY
from bench.server_usage import Usage, UsageMeter, measured_server, postmaster_pid
from service.db import gauges
from tests.support.http_client import HttpClient
from tests.support.postgres import Postgres
from tests.support.processes import ServiceProcess, running_service
from tests.support.receiver import ReceiverProcess

DATABASE = "capacity"
PROBE = "bench-probe"  # marks the bench's own statements, left out of the figures
LONG = 1500  # a focus period that never ends within the run
FOCUSING = "SELECT count(*) FROM operations WHERE state = 'focusing'"

Check = Callable[[int, Any], str | None]


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    body: dict[str, Any] | None
    check: Check


@dataclass
class Row:
    """One unit of work's figures, per unit."""

    unit: str
    units: int
    service_us: float
    postgres_us: float
    backends_us: float
    background_us: float
    statements: float
    commits: float
    wal_bytes: float
    fpi_bytes: float
    rows: float
    hot_updates: float
    locks: float
    index_entries: float
    dirtied: float
    extra: dict[str, float] = field(default_factory=dict)
    tables: dict[str, dict[str, float]] = field(default_factory=dict)
    top_statements: list[tuple[str, float, float]] = field(default_factory=list)
    note: str = ""


def per_unit(unit: str, usage: Usage, units: int, note: str = "", **extra_cpu: float) -> Row:
    n = max(units, 1)
    backends = usage.cpu.get("backends", 0.0)
    background = sum(v for k, v in usage.cpu.items() if k in usage.server_parts and k != "backends")
    tables: dict[str, dict[str, float]] = {}
    for name, writes in usage.relations.items():
        table = name.split(".")[0].removesuffix(" (toast)")
        entry = tables.setdefault(table, {"rows": 0.0, "hot": 0.0, "locks": 0.0, "index": 0.0, "wal": 0.0})
        entry["rows"] += writes.rows / n
        entry["hot"] += writes.hot_updated / n
        entry["locks"] += writes.locked / n
        entry["index"] += writes.index_entries / n
        entry["wal"] += writes.wal_bytes / n
    return Row(
        unit=unit,
        units=units,
        service_us=usage.cpu.get("service", 0.0) / n * 1e6,
        postgres_us=(backends + background) / n * 1e6,
        backends_us=backends / n * 1e6,
        background_us=background / n * 1e6,
        statements=usage.calls / n,
        commits=usage.commits / n,
        wal_bytes=usage.wal_bytes / n,
        fpi_bytes=usage.fpi_bytes / n,
        rows=usage.rows / n,
        hot_updates=usage.hot_updates / n,
        locks=usage.locks / n,
        index_entries=usage.index_entries / n,
        dirtied=usage.dirtied / n,
        extra={k: v / n * 1e6 for k, v in extra_cpu.items()},
        tables=tables,
        top_statements=[
            (" ".join(s.query.split())[:80], s.calls / n, s.exec_ms / max(s.calls, 1))
            for s in usage.statements[:4]
        ],
        note=note,
    )


def difference(unit: str, watched: Row, plain: Row, note: str) -> Row:
    """What ``watched`` costs beyond ``plain`` (the same work, per unit)."""
    keys = (
        "service_us",
        "postgres_us",
        "backends_us",
        "background_us",
        "statements",
        "commits",
        "wal_bytes",
        "fpi_bytes",
        "rows",
        "hot_updates",
        "locks",
        "index_entries",
        "dirtied",
    )
    values = {key: getattr(watched, key) - getattr(plain, key) for key in keys}
    return Row(unit=unit, units=watched.units, note=note, top_statements=watched.top_statements, **values)


# --- answers ------------------------------------------------------------------------------------


def status(code: int, word: str | None = None, key: str = "status") -> Check:
    def check(got: int, body: Any) -> str | None:
        if got != code:
            return f"HTTP {got}: {json.dumps(body)[:200]}"
        if word is not None and (not isinstance(body, dict) or body.get(key) != word):
            return f"{key} {body.get(key) if isinstance(body, dict) else body!r}, wanted {word}"
        return None

    return check


def start(conversation: str, seconds: int = LONG) -> dict[str, Any]:
    return {
        "tool_call_id": f"start-{uuid.uuid4()}",
        "conversation_id": conversation,
        "tool": "pomodoro.start",
        "arguments": {"duration_seconds": seconds, "activity": "write the report"},
    }


def interrupt(conversation: str) -> dict[str, Any]:
    return {
        "tool_call_id": f"interrupt-{uuid.uuid4()}",
        "conversation_id": conversation,
        "tool": "pomodoro.interrupt",
        "arguments": {},
    }


def ask(conversation: str) -> dict[str, Any]:
    return {
        "tool_call_id": f"ask-{uuid.uuid4()}",
        "conversation_id": conversation,
        "tool": "interact.ask",
        "arguments": {"prompt": "Another one after a break?", "choices": ["yes", "later"]},
    }


def tool(body: dict[str, Any], check: Check) -> Request:
    return Request("POST", "/v1/tool-calls", body, check)


# --- the bench ----------------------------------------------------------------------------------


class Bench:
    def __init__(
        self, server: Postgres, url: str, service: ServiceProcess, tokens: dict[str, str], args: Any
    ) -> None:
        self.server = server
        self.url = url
        self.service = service
        self.tokens = tokens
        self.args = args
        self.postmaster = postmaster_pid(server.data)
        self.probe = psycopg.connect(url, autocommit=True, application_name=PROBE)
        self.probe_pid = int(self.probe.execute("SELECT pg_backend_pid()").fetchone()[0])  # type: ignore[index]
        self.runner = asyncio.Runner()
        self.clients: dict[str, list[HttpClient]] = {}
        self.failures: list[str] = []
        self.rows: list[Row] = []
        self.start_seconds = 0.0

    def close(self) -> None:
        for clients in self.clients.values():
            for client in clients:
                self.runner.run(client.close())
        self.runner.close()
        self.probe.close()

    def meter(self, **processes: int) -> UsageMeter:
        return UsageMeter(
            self.server.admin_url,
            self.url,
            DATABASE,
            self.postmaster,
            {"service": self.service.pid, **processes},
            ignore_marker=PROBE,
            ignore_pids=frozenset({self.probe_pid}),
        )

    def query(self, statement: str, params: Sequence[Any] | dict[str, Any] = ()) -> Any:
        row = self.probe.execute(f"{statement} /* {PROBE} */", params).fetchone()
        return row[0] if row else None

    def _clients(self, audience: str, count: int) -> list[HttpClient]:
        clients = self.clients.setdefault(audience, [])
        while len(clients) < count:
            clients.append(HttpClient(self.service.base_url, self.tokens[audience]))
        return clients[:count]

    def send(
        self, requests: Sequence[Request], audience: str = "agent", concurrency: int | None = None
    ) -> list[Any]:
        """Run the requests on ``concurrency`` keep-alive connections; every answer is checked.
        Returns the answers' bodies in request order."""
        clients = self._clients(audience, concurrency or self.args.concurrency)
        bodies: list[Any] = [None] * len(requests)

        async def worker(client: HttpClient, index: int) -> None:
            for i in range(index, len(requests), len(clients)):
                request = requests[i]
                payload = b"" if request.body is None else json.dumps(request.body).encode()
                try:
                    answer = await client.request(request.method, request.path, payload)
                except (asyncio.IncompleteReadError, ConnectionError):
                    # The server closed a keep-alive connection that sat idle; every request
                    # here may be sent twice (a tool call or an answer replays its first one).
                    answer = await client.request(request.method, request.path, payload)
                code, body = answer.status, answer.json()
                bodies[i] = body
                problem = request.check(code, body)
                if problem is not None and len(self.failures) < 20:
                    self.failures.append(f"{request.method} {request.path}: {problem}")

        async def all_workers() -> None:
            await asyncio.gather(*(worker(client, i) for i, client in enumerate(clients)))

        self.runner.run(all_workers())
        return bodies

    def measured(self, unit: str, requests: Sequence[Request], audience: str = "agent", **kw: Any) -> Row:
        meter = self.meter()
        meter.start()
        self.send(requests, audience, kw.get("concurrency"))
        time.sleep(0.2)  # the after-commit wake-ups of the last answers
        row = per_unit(unit, meter.stop(), len(requests), kw.get("note", ""))
        self.rows.append(row)
        return row

    # -- the units --------------------------------------------------------------------------------

    def tool_calls(self, conversations: list[str]) -> None:
        agent = status
        # Every conversation has had one Pomodoro already: its workspace exists, as it would.
        self.send([tool(start(c), agent(202, "accepted")) for c in conversations])
        self.send([tool(interrupt(c), agent(200, "interrupted")) for c in conversations])
        began = time.perf_counter()
        self.measured("pomodoro.start", [tool(start(c), agent(202, "accepted")) for c in conversations])
        self.start_seconds = time.perf_counter() - began
        self.measured(
            "refusal (409 already focusing)",
            [tool(start(c), agent(409, "operation_already_focusing", "error")) for c in conversations],
        )
        interrupts = [interrupt(c) for c in conversations]
        self.measured("pomodoro.interrupt", [tool(b, agent(200, "interrupted")) for b in interrupts])
        self.measured("replay (same id, same body)", [tool(b, agent(200, "interrupted")) for b in interrupts])
        invalid = [{**start(c), "arguments": {"duration_seconds": 0}} for c in conversations]
        self.measured(
            "invalid arguments (422)", [tool(b, agent(422, "invalid_arguments", "error")) for b in invalid]
        )
        asks = [ask(c) for c in conversations]
        self.measured("interact.ask", [tool(b, agent(202, "accepted")) for b in asks])
        self.measured(
            "answer (Host API)",
            [
                Request(
                    "POST",
                    f"/v1/host/interactions/{b['tool_call_id']}/answer",
                    {"answer": "yes"},
                    agent(200, "answered"),
                )
                for b in asks
            ],
            audience="host",
        )

    def deadlines(self, conversations: list[str]) -> None:
        """Starts whose period ends a few seconds later, settled by the service's sweeper: the
        window opens after the last start answered and closes when none focuses any more."""
        seconds = max(3, math.ceil(self.start_seconds * 1.5) + 2)
        began = time.perf_counter()
        self.send([tool(start(c, seconds), status(202, "accepted")) for c in conversations])
        if time.perf_counter() - began >= seconds:
            self.failures.append(f"the deadline starts took longer than their {seconds} s period")
        meter = self.meter()
        meter.start()
        before = int(self.query(FOCUSING))
        self._wait(lambda: self.query(FOCUSING) == 0, seconds + 30)
        time.sleep(0.2)
        usage = meter.stop()
        note = f"{before} of {len(conversations)} still focusing when the window opened, {seconds} s periods"
        self.rows.append(per_unit("deadline (sweeper)", usage, before, note))

    def relay(self) -> None:
        """The outbox rows of the run so far, held back by a short lease until the relay is
        ready, then delivered by one ``python -m relay`` to a local receiver answering 204."""
        receiver = ReceiverProcess()
        try:
            pending = int(
                self.query(
                    "WITH held AS (UPDATE outbox SET lease_owner = 'bench-hold', "
                    "lease_expires_at = clock_timestamp() + interval '10 seconds' "
                    "WHERE status = 'pending' RETURNING 1) SELECT count(*) FROM held"
                )
            )
            relays = Relays(self.url, receiver.url, 1)
            try:
                if receiver.stats()["requests"]:
                    self.failures.append("the relay delivered before the window opened (slow start)")
                meter = self.meter(relay=relays.processes[0].pid)
                meter.start()
                receiver.wait_for(pending, timeout=120)
                self._wait(
                    lambda: self.query("SELECT count(*) FROM outbox WHERE status = 'pending'") == 0, 30
                )
                time.sleep(0.2)
                usage = meter.stop()
            finally:
                relays.stop()
            stats = receiver.stats()
        finally:
            receiver.close()
        if stats["requests"] != stats["unique"]:
            self.failures.append(f"the relay repeated {stats['requests'] - stats['unique']} deliveries")
        row = per_unit(
            "relay delivery (backlog)",
            usage,
            pending,
            f"{pending} rows in batches of up to 100",
            relay=usage.cpu.get("relay", 0.0),
        )
        self.rows.append(row)

    def watched(self, cycles: int) -> None:
        """Start+interrupt cycles one after another in one conversation, unwatched, then watched
        by one event stream: the difference is what watching costs."""
        plain, watched = f"plain-{secrets.token_hex(4)}", f"watched-{secrets.token_hex(4)}"

        def cycle_requests(conversation: str) -> list[Request]:
            out = []
            for _ in range(cycles):
                out.append(tool(start(conversation), status(202, "accepted")))
                out.append(tool(interrupt(conversation), status(200, "interrupted")))
            return out

        self.send(cycle_requests(plain)[:2], concurrency=1)
        self.send(cycle_requests(watched)[:2], concurrency=1)
        unwatched = self.measured("cycle, unwatched", cycle_requests(plain), concurrency=1)
        unwatched.units = cycles
        self.rows.remove(unwatched)
        unwatched = _rescale(unwatched, 2)
        received = 0
        opened = asyncio.Event()

        async def stream(stop: asyncio.Event) -> None:
            nonlocal received
            headers = {"Authorization": f"Bearer {self.tokens['host']}"}
            async with (
                httpx.AsyncClient(
                    base_url=self.service.base_url, timeout=httpx.Timeout(30.0, read=None)
                ) as client,
                client.stream("GET", f"/v1/host/conversations/{watched}/events", headers=headers) as answer,
            ):
                async for line in answer.aiter_lines():
                    if line.startswith(":"):
                        opened.set()
                    elif line.startswith("event:"):
                        received += 1
                    if stop.is_set():
                        return

        stop = asyncio.Event()
        task = self.runner.run(_started(stream(stop), opened))
        meter = self.meter()
        meter.start()
        self.send(cycle_requests(watched), concurrency=1)
        deadline = time.monotonic() + 10
        while received < 4 * cycles and time.monotonic() < deadline:
            self.runner.run(asyncio.sleep(0.05))
        usage = meter.stop()
        stop.set()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            self.runner.run(_finish(task))
        watched_row = per_unit("cycle, watched", usage, cycles)
        if received < 4 * cycles:
            self.failures.append(f"the stream received {received} events of {4 * cycles}")
        # The stream only reads: its database cost is its own statements (the feed's reads of
        # projection_events), timed by pg_stat_statements; the service's CPU is the difference.
        reads = [s for s in usage.statements if "FROM projection_events" in s.query]
        row = difference(
            "event stream, one conversation watched (per cycle)",
            watched_row,
            unwatched,
            f"{received / cycles:.1f} events per start+interrupt cycle reached the stream; Postgres: the "
            "stream's reads (execution time), service: watched minus unwatched",
        )
        zero = dict.fromkeys(
            ("commits", "wal_bytes", "fpi_bytes", "rows", "hot_updates", "locks", "index_entries"), 0.0
        )
        calls = sum(s.calls for s in reads)
        self.rows.append(
            Row(
                **{
                    **asdict(row),
                    **zero,
                    "statements": calls / cycles,
                    "postgres_us": sum(s.exec_ms for s in reads) * 1e3 / cycles,
                    "backends_us": sum(s.exec_ms for s in reads) * 1e3 / cycles,
                    "background_us": 0.0,
                    "dirtied": sum(s.dirtied for s in reads) / cycles,
                    "top_statements": [
                        (" ".join(s.query.split())[:80], s.calls / cycles, s.exec_ms / max(s.calls, 1))
                        for s in reads
                    ],
                }
            )
        )

    def console(self, refreshes: int, pad: int) -> None:
        for label in ("at the run's size", f"+{pad:,} finished Pomodoros"):
            if label.startswith("+"):
                self._pad(pad)
            sizes = self.query(
                "SELECT format('%%s operations, %%s outbox rows', "
                "(SELECT count(*) FROM operations), (SELECT count(*) FROM outbox))"
            )
            self.measured(
                f"console refresh, {label}",
                [Request("GET", "/v1/ops/overview", None, status(200)) for _ in range(refreshes)],
                audience="operator",
                concurrency=1,
                note=str(sizes),
            )
            meter = self.meter()
            with psycopg.connect(self.url, autocommit=True, application_name="gauges") as conn:
                meter.start()
                for _ in range(refreshes):
                    for statement in (
                        gauges.OUTBOX_BACKLOG,
                        gauges.DELIVERY_STATE,
                        gauges.FOCUSING_OPERATIONS,
                    ):
                        conn.execute(statement).fetchall()
                usage = meter.stop()
            self.rows.append(per_unit(f"gauge sample, {label}", usage, refreshes, str(sizes)))

    def _pad(self, pomodoros: int) -> None:
        """Finished history as weeks of use leave it (``bench.seeds.HISTORY``)."""
        self.probe.execute(f"{HISTORY} /* {PROBE} */", {"pomodoros": pomodoros})
        # Vacuumed now, so that autovacuum does not run inside the window that follows.
        self.probe.execute(f"VACUUM ANALYZE /* {PROBE} */")

    def _wait(self, done: Callable[[], bool], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            if time.monotonic() > deadline:
                raise TimeoutError("the bench waited in vain")
            time.sleep(0.05)


def _rescale(row: Row, factor: float) -> Row:
    """Figures per request turned into figures per ``factor`` requests (a cycle is two calls)."""
    scaled = asdict(row)
    for key, value in scaled.items():
        if isinstance(value, float):
            scaled[key] = value * factor
    return Row(**scaled)


async def _started(coro: Coroutine[Any, Any, Any], opened: asyncio.Event) -> asyncio.Task[Any]:
    task = asyncio.ensure_future(coro)
    await asyncio.wait_for(opened.wait(), 10)
    return task


async def _finish(task: asyncio.Task[Any]) -> None:
    await task


# --- the report ---------------------------------------------------------------------------------

COLUMNS = (
    ("service_us", "service CPU us", "{:,.0f}"),
    ("postgres_us", "Postgres CPU us", "{:,.0f}"),
    ("statements", "statements", "{:.2f}"),
    ("commits", "write xacts", "{:.2f}"),
    ("wal_bytes", "WAL bytes", "{:,.0f}"),
    ("fpi_bytes", "of it FPI", "{:,.0f}"),
    ("rows", "rows written", "{:.1f}"),
    ("hot_updates", "of them HOT", "{:.1f}"),
    ("locks", "row locks", "{:.1f}"),
    ("index_entries", "index entries", "{:.1f}"),
    ("dirtied", "buffers dirtied", "{:.1f}"),
)


def table(rows: Sequence[Row]) -> str:
    head = "| unit of work | " + " | ".join(title for _, title, _ in COLUMNS) + " |"
    rule = "| --- |" + " ---: |" * len(COLUMNS)
    lines = [head, rule]
    for row in rows:
        cells = [fmt.format(getattr(row, key)) for key, _, fmt in COLUMNS]
        lines.append(f"| {row.unit} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def details(rows: Sequence[Row]) -> str:
    out = []
    for row in rows:
        out.append(f"\n{row.unit}: {row.units} units" + (f" ({row.note})" if row.note else ""))
        out.append(
            f"    Postgres CPU {row.postgres_us:,.0f} us = backends {row.backends_us:,.0f} + background "
            f"{row.background_us:,.0f}"
            + "".join(f"; {name} process {value:,.0f} us" for name, value in row.extra.items())
        )
        for table_name, entry in sorted(row.tables.items(), key=lambda kv: -kv[1]["wal"]):
            if entry["wal"] < 1 and entry["rows"] < 0.01:
                continue
            out.append(
                f"    {table_name:<18} rows {entry['rows']:5.2f} (HOT {entry['hot']:4.2f}, locks "
                f"{entry['locks']:4.2f})  index entries {entry['index']:5.2f}  WAL {entry['wal']:7,.0f} B"
            )
        for query, calls, mean_ms in row.top_statements:
            out.append(f"    {calls:6.2f} x {mean_ms:7.3f} ms  {query}")
    return "\n".join(out)


# --- main ---------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--units", type=int, default=1000, help="units of each kind of work")
    parser.add_argument("--concurrency", type=int, default=8, help="HTTP workers")
    parser.add_argument("--watched-cycles", type=int, default=200, help="cycles with and without a watcher")
    parser.add_argument("--refreshes", type=int, default=30, help="console refreshes (and gauge samples)")
    parser.add_argument("--pad", type=int, default=20000, help="history rows added before the second refresh")
    parser.add_argument("--json", type=Path, help="also write the rows as JSON to this file")
    args = parser.parse_args(argv)
    if not 100 <= args.units <= 20000 or not 1 <= args.concurrency <= 64:
        parser.error("keep it bounded: --units 100..20000, --concurrency 1..64")
    began = time.perf_counter()
    print(
        f"capacity: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at start, "
        f"{args.units} units per kind, {args.concurrency} workers, {time.strftime('%Y-%m-%d %H:%M:%S')}",
        flush=True,
    )
    tokens = {
        "agent": "bench-agent-" + secrets.token_hex(16),
        "host": "bench-host-" + secrets.token_hex(16),
        "operator": "bench-operator-" + secrets.token_hex(16),
    }
    env = {"AGENT_TOKEN": tokens["agent"], "HOST_TOKEN": tokens["host"], "OPERATOR_TOKEN": tokens["operator"]}
    with (
        measured_server(DATABASE) as (server, url),
        tempfile.TemporaryDirectory(prefix="bench-capacity-") as tmp,
        running_service(url, Path(tmp), env=env) as service,
    ):
        bench = Bench(server, url, service, tokens, args)
        try:
            run = secrets.token_hex(3)
            conversations = [f"cap-{run}-{i}" for i in range(args.units)]
            phases: list[tuple[str, Callable[[], None]]] = [
                ("tool calls", lambda: bench.tool_calls(conversations)),
                ("deadlines", lambda: bench.deadlines(conversations)),
                ("relay", bench.relay),
                ("event stream", lambda: bench.watched(args.watched_cycles)),
                ("console", lambda: bench.console(args.refreshes, args.pad)),
            ]
            for phase, run_phase in phases:
                phase_began = time.perf_counter()
                run_phase()
                print(f"    {phase}: {time.perf_counter() - phase_began:.0f} s", flush=True)
        finally:
            bench.close()
    rows = bench.rows
    print("\nPer unit of work (CPU in microseconds; everything else a count or bytes per unit):\n")
    print(table(rows))
    print(details(rows))
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in rows], indent=1))
    print(f"\ncapacity: {time.perf_counter() - began:.0f} s")
    if bench.failures:
        print(f"FAILED: {len(bench.failures)} problems, e.g. {bench.failures[0]}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

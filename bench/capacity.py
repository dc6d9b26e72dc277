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
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import httpx
import psycopg

from bench.capacity_figures import Row, details, difference, per_unit, rescale, table
from bench.capacity_harness import (
    DATABASE,
    FOCUSING,
    Harness,
    Request,
    ask,
    finish,
    interrupt,
    start,
    started,
    status,
    tool,
)
from bench.common import Relays
from bench.measured_server import measured_server
from harness.processes import running_service
from harness.receiver import ReceiverProcess
from service.db import gauges


class Bench(Harness):
    """The units of work, each measured in its own window."""

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
        self.wait_until(lambda: self.query(FOCUSING) == 0, seconds + 30)
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
                self.wait_until(
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
        unwatched = rescale(unwatched, 2)
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
        task = self.runner.run(started(stream(stop), opened))
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
            self.runner.run(finish(task))
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
                self.pad(pad)
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
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, seconds: that it still runs")
    args = parser.parse_args(argv)
    if args.smoke:
        args.units, args.watched_cycles, args.refreshes, args.pad = 20, 10, 2, 16
    elif not 100 <= args.units <= 20000 or not 1 <= args.concurrency <= 64:
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

"""Pomodoro start+interrupt cycles per second: the HTTP Tool API beside the same writes in raw SQL.

    .venv/bin/python -m bench.tool_cycles [--seconds 10] [--concurrency 16] [--warmup 2]
        [--client lean|httpx] [--no-breakdown] [--thinnest] [--no-sweeper] [--with-notify]
        [--serve-env NAME=VALUE]

(a) HTTP: ``python -m service serve`` (default settings, so the default pool size) on a fresh
    database; ``--concurrency`` asyncio workers, each with its own conversation, loop
    ``POST /v1/tool-calls`` pomodoro.start (202 accepted) then pomodoro.interrupt (200 interrupted).
(b) Raw SQL: pgbench on the same server, another fresh database, ``-c`` = the HTTP concurrency,
    ``-j 2``; each Tool call is ONE statement (the service's own), so a cycle is two round
    trips and two commits. Afterwards the outbox must hold exactly one row per cycle.
(c) Breakdown: the same cycles through the service's ``call_tool`` in this process (no HTTP, no
    sweeper), to split the gap between HTTP and the use case's SQL.
(d) With --thinnest: the same cycles through ``bench.thinnest_http``, the least a Python HTTP
    service of the same statement does (uvicorn, a bare ASGI callable, one pool; no checks, logs,
    metrics or wake-ups): the floor under ``serve`` on this machine.

--no-sweeper and --serve-env (a setting for the service, e.g. DB_POOL_SIZE=16) are diagnoses;
(a) also prints how many of the service's pool checkouts waited for a connection and its event
loop's lag, from its /metrics (``lineup_db_pool_*``, ``lineup_event_loop_lag_seconds``); every
phase prints the server's WAL flushes per commit (how many commits share one flush: Postgres'
group commit). --with-notify adds the raw figure with a NOTIFY per statement (not the baseline).

Prints cycles/s of both, their ratio, HTTP cycle p50/p99 latency and where the CPU went.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from bench.common import add_pg_settings, bench_server, event_loop, tool_poster
from bench.cycle_phases import Answer, Phase, drive, finished, latency_line, report
from bench.sql_ceiling import run_pgbench
from harness.database import named_server, throwaway_database
from harness.http_client import HttpClient
from harness.processes import free_port, running_service


def pool_figures(base_url: str) -> dict[str, float]:
    """The service's pool counters and its event loop's lag from its /metrics (open to a peer on
    127.0.0.1)."""
    text = httpx.get(f"{base_url}/metrics", timeout=10.0).text
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        if family.name.startswith("lineup_db_pool_") or family.name == "lineup_event_loop_lag_seconds"
        for sample in family.samples
        if sample.labels.get("pool", "lineup-service") == "lineup-service" and "le" not in sample.labels
    }


def pool_note(before: dict[str, float], after: dict[str, float]) -> str:
    def grew(name: str) -> float:
        return after.get(name, 0.0) - before.get(name, 0.0)

    checkouts, waited = grew("lineup_db_pool_checkouts_total"), grew("lineup_db_pool_checkouts_waited_total")
    wait = grew("lineup_db_pool_wait_seconds_total")
    share = waited / checkouts if checkouts else 0.0
    per_wait = f", {1000 * wait / waited:.1f} ms each on average" if waited else ""
    lags = grew("lineup_event_loop_lag_seconds_count")
    lag = f"{1000 * grew('lineup_event_loop_lag_seconds_sum') / lags:.1f} ms" if lags else "not sampled"
    return (
        f"pool: {after.get('lineup_db_pool_max_connections', 0):.0f} connections; {waited:.0f} of "
        f"{checkouts:.0f} checkouts ({share:.0%}) waited for one{per_wait}; the event loop's lag "
        f"{lag} on average ({lags:.0f} samples); warm-up included"
    )


def _default_pool_size() -> int:
    from service.settings import Settings

    return int(Settings.model_fields["db_pool_size"].default)


def run_http(
    concurrency: int,
    seconds: float,
    warmup: float,
    log_dir: Path,
    client: str,
    serve_args: list[str],
    serve_env: dict[str, str] | None = None,
) -> Phase:
    with (
        throwaway_database("http") as url,
        running_service(url, log_dir, args=serve_args, env=serve_env) as service,
    ):

        async def go() -> Phase:
            if client == "httpx":
                limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
                async with httpx.AsyncClient(
                    base_url=service.base_url, headers=service.agent_headers, limits=limits, timeout=30.0
                ) as http:

                    async def post(payload: dict[str, Any]) -> Answer:
                        answer = await http.post("/v1/tool-calls", json=payload)
                        return answer.status_code, answer.json()

                    return await drive([post] * concurrency, seconds, warmup, url, service.pid)
            lean = [HttpClient(service.base_url, service.agent_token) for _ in range(concurrency)]
            try:
                return await drive([tool_poster(c) for c in lean], seconds, warmup, url, service.pid)
            finally:
                for connection in lean:
                    await connection.close()

        pool_before = pool_figures(service.base_url)
        with event_loop() as runner:
            phase = runner.run(go())
        phase.notes.append(pool_note(pool_before, pool_figures(service.base_url)))
        phase.notes.append(
            f"service ready in {service.ready_in:.1f} s; default settings (DB pool size "
            f"{_default_pool_size()}) {' '.join(serve_args)} "
            + " ".join(f"{k}={v}" for k, v in (serve_env or {}).items())
        )
        return finished(phase, url)


def run_thinnest(concurrency: int, seconds: float, warmup: float, log_dir: Path, pool_size: int) -> Phase:
    """The same tool calls through ``bench.thinnest_http``: the least any Python HTTP service of the
    same statement does (no checks, logs, metrics, wake-ups or sweeper)."""
    port = free_port()
    with throwaway_database("thin") as url, (log_dir / "thinnest.log").open("wb") as log:
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bench.thinnest_http",
                "--database-url",
                url,
                "--port",
                str(port),
                "--pool-size",
                str(pool_size),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + 60
            while True:
                if server.poll() is not None:
                    # The log lives in the bench's temporary directory: say what it holds.
                    tail = Path(log.name).read_text(errors="replace")[-2000:]
                    raise RuntimeError(f"bench.thinnest_http exited with {server.returncode}:\n{tail}")
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise RuntimeError("bench.thinnest_http did not listen within 60 s") from None
                    time.sleep(0.1)

            async def go() -> Phase:
                lean = [HttpClient(f"http://127.0.0.1:{port}") for _ in range(concurrency)]
                try:
                    return await drive([tool_poster(c) for c in lean], seconds, warmup, url, server.pid)
                finally:
                    for connection in lean:
                        await connection.close()

            with event_loop() as runner:
                phase = runner.run(go())
        finally:
            server.terminate()
            server.wait(20)
        phase.notes.append(f"pool of {pool_size} connections, as serve's default")
        return finished(phase, url)


def run_in_process(concurrency: int, seconds: float, warmup: float) -> Phase:
    """The same tool calls through the service's own use case (call_tool), without HTTP or sweeper."""
    from service.db.pool import open_pool
    from service.http import status_of_kind
    from service.manifests import registry_of
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
        registry = registry_of(settings)

        async def go() -> Phase:
            pool = await open_pool(settings.psycopg_url, size=settings.db_pool_size, name="bench-inproc")
            runtime = Runtime(pool=pool, settings=settings, registry=registry)

            async def call(payload: dict[str, Any]) -> Answer:
                answer = await call_tool(runtime, ToolCallRequest(**payload))
                return status_of_kind(answer.kind), json.loads(answer.body)

            try:
                return await drive([call] * concurrency, seconds, warmup, url, None)
            finally:
                await pool.close()

        with event_loop() as runner:
            phase = runner.run(go())
        return finished(phase, url)


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
        "--thinnest",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="run (d): the same calls through bench.thinnest_http, the least a Python HTTP service "
        "of this statement does (uvicorn and a bare ASGI callable; no checks, logs, metrics, wake-ups): "
        "the headline ratio is serve against it",
    )
    parser.add_argument(
        "--no-sweeper",
        action="store_true",
        help="(diagnosis only) serve with --no-sweeper to see what the sweeper's wake-ups cost",
    )
    parser.add_argument(
        "--serve-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="(diagnosis only) a setting for the service, e.g. DB_POOL_SIZE=16; repeatable",
    )
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, seconds: that it still runs")
    add_pg_settings(parser)
    parser.add_argument(
        "--vary",
        metavar="NAME=V1,V2,...",
        help="run once per value of this server setting, in turn (each on a server of its own with the "
        "--pg-settings and this one), e.g. commit_delay=0,20,50,100,200; a table at the end",
    )
    parser.add_argument("--rounds", type=int, default=1, help="with --vary: times over the values")
    args = parser.parse_args(argv)
    if args.smoke:
        args.seconds, args.warmup, args.concurrency = 1, 0.2, 2
    if any(
        "=" not in item for item in [*args.serve_env, *args.pg_setting, *([args.vary] if args.vary else [])]
    ):
        parser.error("--serve-env, --pg-setting and --vary take NAME=VALUE")
    serve_env = dict(item.split("=", 1) for item in args.serve_env)
    if not 1 <= args.seconds <= 60 or not 1 <= args.concurrency <= 64 or not 0 <= args.warmup <= 10:
        parser.error("keep it bounded: --seconds 1..60, --concurrency 1..64, --warmup 0..10")
    if args.vary is None:
        with bench_server(args.pg_setting):
            return measure(args, serve_env)[0]
    return vary(args, serve_env)


def vary(args: argparse.Namespace, serve_env: dict[str, str]) -> int:
    """Each value of ``--vary NAME=V1,V2,...`` in turn, ``--rounds`` times over (alternating in one
    sitting), each run on a server of its own with ``--pg-setting``s and that value; a table at the
    end."""
    name, _, values = args.vary.partition("=")
    rows: list[tuple[str, int, dict[str, float]]] = []
    code = 0
    for round_ in range(1, args.rounds + 1):
        for value in values.split(","):
            settings = [*args.pg_setting, f"{name}={value}"]
            with bench_server(settings):
                done, figures = measure(
                    argparse.Namespace(**{**vars(args), "pg_setting": settings}), serve_env
                )
            code = max(code, done)
            rows.append((value, round_, figures))
    fixed = f" with {', '.join(args.pg_setting)}" if args.pg_setting else ""
    print(f"\n{name} varied{fixed}, {args.rounds} round(s), {args.seconds} s phases:\n")
    print(
        f"| {name} | round | load | serve | thinnest | ceiling | serve / thinnest | serve / ceiling "
        "| WAL flushes per commit: serve / thinnest / ceiling |"
    )
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for value, round_, f in rows:
        print(
            f"| {value} | {round_} | {f['load']:.1f} | {f['serve']:.0f} | {f['thinnest']:.0f} "
            f"| {f['ceiling']:.0f} "
            f"| {f['serve'] / f['thinnest'] if f['thinnest'] else float('nan'):.2f} "
            f"| {f['serve'] / f['ceiling'] if f['ceiling'] else float('nan'):.2f} "
            f"| {f['flush_serve']:.2f} / {f['flush_thinnest']:.2f} / {f['flush_ceiling']:.2f} |"
        )
    return code


def _flushes(phase: Phase | None) -> float:
    return phase.wal_flushes / phase.commits if phase is not None and phase.commits else float("nan")


def measure(args: argparse.Namespace, serve_env: dict[str, str]) -> tuple[int, dict[str, float]]:
    load = os.getloadavg()[0]
    print(
        f"tool_cycles: server {named_server().rsplit('@', 1)[-1]}, {os.cpu_count()} cores, "
        f"load average {load:.2f} at start, concurrency {args.concurrency}, "
        f"{args.seconds} s per phase, {time.strftime('%Y-%m-%d %H:%M:%S')}"
        + (f"; server settings: {', '.join(args.pg_setting)}" if args.pg_setting else "")
    )
    serve_args = ["--no-sweeper"] if args.no_sweeper else []
    with tempfile.TemporaryDirectory(prefix="bench-tool-cycles-") as tmp:
        work = Path(tmp)
        http = run_http(args.concurrency, args.seconds, args.warmup, work, args.client, serve_args, serve_env)
        raw, raw_rate, statement_ms = run_pgbench(args.concurrency, args.seconds, work)
        notifying = (
            run_pgbench(args.concurrency, args.seconds, work, with_notify=True) if args.with_notify else None
        )
        inproc = run_in_process(args.concurrency, args.seconds, args.warmup) if args.breakdown else None
        thinnest = (
            run_thinnest(args.concurrency, args.seconds, args.warmup, work, _default_pool_size())
            if args.thinnest
            else None
        )

    report(f"(a) HTTP Tool API through `python -m service serve` ({args.client} client)", http, http.rate)
    report(
        "(b) raw SQL through pgbench, the ceiling: a statement per tool call, no NOTIFY (-M prepared, -j 2)",
        raw,
        raw_rate,
    )
    for label, ms in zip(("start statement", "interrupt stmt"), statement_ms, strict=False):
        print(f"    {label:<18}{ms:.2f} ms average (pgbench -r)")
    if notifying is not None:
        report("(b') raw SQL with one NOTIFY per statement (not the baseline)", notifying[0], notifying[1])
    if inproc is not None:
        report(
            "(c) breakdown: the service's call_tool in-process (same SQL, no HTTP, no sweeper)",
            inproc,
            inproc.rate,
        )
    if thinnest is not None:
        report(
            "(d) the thinnest Python HTTP service of the same statement (bench.thinnest_http)",
            thinnest,
            thinnest.rate,
        )

    ratio = http.rate / raw_rate if raw_rate else float("nan")
    print("\nsummary")
    if thinnest is not None and thinnest.rate:
        print(
            f"    HEADLINE serve / thinnest Python floor    {http.rate / thinnest.rate:.2f}   "
            "(target >= 0.85)"
        )
    print(f"    ratio HTTP / raw-SQL ceiling (no NOTIFY)  {ratio:.2f}   (for the record)")
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
    if thinnest is not None and raw_rate:
        print(
            f"    thinnest Python HTTP / ceiling            {thinnest.rate / raw_rate:.2f}   "
            "(the floor under any Python service of this statement)"
        )
    print(latency_line("HTTP cycle", http.latencies))
    failed = bool(
        http.failures
        or raw.failures
        or (inproc and inproc.failures)
        or (thinnest and thinnest.failures)
        or (notifying and notifying[0].failures)
        or not raw.cycles
    )
    figures = {
        "load": load,
        "serve": http.rate,
        "thinnest": thinnest.rate if thinnest is not None else float("nan"),
        "ceiling": raw_rate,
        "flush_serve": _flushes(http),
        "flush_thinnest": _flushes(thinnest),
        "flush_ceiling": _flushes(raw),
    }
    return (1 if failed else 0), figures


if __name__ == "__main__":
    sys.exit(main())

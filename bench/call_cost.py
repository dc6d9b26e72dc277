"""Where the CPU of one tool call goes: microseconds of Python per call, by part.

    .venv/bin/python -m bench.call_cost [--cycles 3000] [--concurrency 16]

CPU time, not wall time: each figure is the CPU the part costs per tool call (start and interrupt
averaged), so it barely moves when other work shares the machine. All in one run, on one fresh
database, cycles of ``pomodoro.start`` then ``pomodoro.interrupt`` per conversation:

(1) the service process over HTTP: ``python -m service serve`` driven by a lean keep-alive
    client; CPU of the service process from /proc (uvicorn, Litestar, handler, database client,
    logs, metrics, sweeper and wake-ups all included);
(2) the ASGI application in this process, driven without an HTTP server (Litestar routing, guard,
    body parsing and validation, the use case, the response);
(3) the use case ``call_tool`` alone (the statement, pool checkout, metrics, log line, wake-ups);
(4) the statement alone (``service.db.tool_calls.call`` with a pooled connection);
(5) request checks alone: JSON decode, body model, the tool's argument schema, the fingerprint;
(6) one ``tool_call`` log line as configured by the service (rendered to /dev/null);
(7) the tool-call counter (``lineup_tool_calls_total``).

(1) minus (2) is the HTTP server; (2) minus (3) and (5) is Litestar; (3) minus (4), (6) and (7)
is the rest of the use case. The in-process driver's own work (building scopes, encoding and
decoding bodies) is measured against an application that answers at once, and taken out of (2).
Exits non-zero when an answer is wrong.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bench.call_instructions import TOKEN, bench_settings, post_tool_call
from bench.common import event_loop, tool_poster
from harness.calls import interrupt_body, start_body
from harness.database import named_server, throwaway_database
from harness.http_client import HttpClient
from harness.measure import process_cpu
from harness.processes import running_service

Call = Callable[[dict[str, Any]], Awaitable[tuple[int, Any]]]


def _body(conversation: str, n: int, tool: str) -> dict[str, Any]:
    tool_call_id = f"{conversation}-{n}-{tool}"
    if tool == "pomodoro.start":
        return start_body(conversation, 1500, "bench", tool_call_id=tool_call_id)
    return interrupt_body(conversation, tool_call_id=tool_call_id)


async def _cycles(calls: list[Call], cycles: int) -> int:
    """Run ``cycles`` start+interrupt cycles, one conversation per caller; returns failures."""
    run = uuid.uuid4().hex[:8]
    failures = 0
    concurrency = len(calls)

    async def worker(index: int) -> None:
        nonlocal failures
        conversation = f"cost-{run}-{index}"
        call = calls[index]
        for n in range(index, cycles, concurrency):
            for tool, status in (("pomodoro.start", 202), ("pomodoro.interrupt", 200)):
                code, _ = await call(_body(conversation, n, tool))
                failures += code != status

    await asyncio.gather(*(worker(i) for i in range(concurrency)))
    return failures


def _cpu_per_call(seconds: float, cycles: int) -> float:
    return seconds / (2 * cycles) * 1e6


class AsgiDriver:
    """Calls the ASGI app directly: one request scope per call, no sockets, no HTTP parsing."""

    def __init__(self, app: Any) -> None:
        self._app = app

    async def lifespan(self) -> Callable[[], Awaitable[None]]:
        inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        outbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        task = asyncio.ensure_future(
            self._app({"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}, inbox.get, outbox.put)
        )
        await inbox.put({"type": "lifespan.startup"})
        started = await outbox.get()
        if started["type"] != "lifespan.startup.complete":
            raise RuntimeError(f"startup failed: {started}")

        async def shutdown() -> None:
            await inbox.put({"type": "lifespan.shutdown"})
            await outbox.get()
            await task

        return shutdown

    async def __call__(self, payload: dict[str, Any]) -> tuple[int, Any]:
        chunks: list[bytes] = []
        status = await post_tool_call(self._app, json.dumps(payload).encode(), chunks)
        return status, json.loads(b"".join(chunks))


async def _answer_at_once(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """An ASGI app that costs nothing: the driver's own share of (2)."""
    if scope["type"] != "http":
        return
    body = (await receive())["body"]
    status = 202 if b"pomodoro.start" in body else 200
    await send({"type": "http.response.start", "status": status, "headers": []})
    await send({"type": "http.response.body", "body": b'{"status":"x"}'})


def measure_http(url: str, cycles: int, concurrency: int, log_dir: Path) -> tuple[float, int]:
    with running_service(url, log_dir, env={"AGENT_TOKEN": TOKEN}) as service:
        clients = [HttpClient(service.base_url, TOKEN) for _ in range(concurrency)]
        calls = [tool_poster(client) for client in clients]

        async def go() -> tuple[float, int]:
            await _cycles(calls, concurrency * 4)  # warm-up: prepared statements, pools
            before = process_cpu(service.pid)
            failures = await _cycles(calls, cycles)
            spent = process_cpu(service.pid) - before
            for client in clients:
                await client.close()
            return spent, failures

        with event_loop() as runner:
            return runner.run(go())


def measure_in_process(url: str, cycles: int, concurrency: int) -> tuple[dict[str, float], int]:
    import logging

    import structlog

    from service.api.bodies import ToolCallBody, parse_json, validate
    from service.app import create_app
    from service.db import tool_calls as tc_db
    from service.domain.idempotency import fingerprint
    from service.http import status_of_kind
    from service.logging import configure_logging
    from service.manifests import registry_of
    from service.metrics import TOOL_CALLS
    from service.use_cases.tool_calls import ToolCallRequest, call_tool

    settings = bench_settings(url)
    registry = registry_of(settings)
    # Logs as the service writes them, to /dev/null instead of stderr.
    devnull = open(os.devnull, "w")  # noqa: SIM115 - kept open for the run
    saved = sys.stderr
    sys.stderr = devnull
    try:
        configure_logging(logging.INFO)
    finally:
        sys.stderr = saved
    app = create_app(settings, registry, sweeper=False)
    driver = AsgiDriver(app)
    results: dict[str, float] = {}

    async def go() -> int:
        shutdown = await driver.lifespan()
        runtime = app.state.runtime
        failures = 0
        try:

            async def timed(name: str, call: Call) -> None:
                nonlocal failures
                await _cycles([call] * concurrency, concurrency * 4)
                begun = time.process_time()
                failures += await _cycles([call] * concurrency, cycles)
                results[name] = _cpu_per_call(time.process_time() - begun, cycles)

            await timed("asgi", driver)
            await timed("driver", AsgiDriver(_answer_at_once))

            async def use_case(payload: dict[str, Any]) -> tuple[int, Any]:
                answer = await call_tool(runtime, ToolCallRequest(**payload))
                return status_of_kind(answer.kind), None

            await timed("use_case", use_case)

            async def statement(payload: dict[str, Any]) -> tuple[int, Any]:
                async with runtime.pool.connection() as conn:
                    result = await tc_db.call(
                        conn,
                        tool_call_id=payload["tool_call_id"],
                        conversation_id=payload["conversation_id"],
                        tool=payload["tool"],
                        fingerprint="x",
                        arguments=json.dumps(payload["arguments"]),
                        decide=runtime.registry.runner(payload["tool"]).decide,
                        context=runtime.context_of(payload["tool"]),
                    )
                return status_of_kind(runtime.registry.kind_of(result.outcome)), None

            await timed("statement", statement)
        finally:
            await shutdown()
        return failures

    with event_loop() as runner:
        failures = runner.run(go())

    n = 20_000
    raw = json.dumps(_body("conv", 1, "pomodoro.start")).encode()
    tool = registry.tool("pomodoro.start")
    assert tool is not None
    begun = time.process_time()
    for _ in range(n):
        data = parse_json(raw)
        body = validate(ToolCallBody, data)
        tool.validate_arguments(body.arguments)
        fingerprint(data)
    results["checks"] = (time.process_time() - begun) / n * 1e6

    log = structlog.get_logger("service.tool_calls")
    sys.stderr = devnull
    try:
        configure_logging(logging.INFO)
        begun = time.process_time()
        for _ in range(n):
            log.info(
                "tool_call",
                tool_call_id="abc",
                conversation_id="conv",
                tool="pomodoro.start",
                status=202,
                outcome="accepted",
                replayed=False,
            )
        results["log"] = (time.process_time() - begun) / n * 1e6
    finally:
        sys.stderr = saved
        configure_logging(logging.WARNING)
    begun = time.process_time()
    for _ in range(n):
        TOOL_CALLS.labels("pomodoro.start", "accepted").inc()
    results["metric"] = (time.process_time() - begun) / n * 1e6
    return results, failures


def main(argv: list[str] | None = None) -> int:
    import logging

    from service.logging import configure_logging

    configure_logging(logging.WARNING)
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cycles", type=int, default=3000, help="measured start+interrupt cycles per part")
    parser.add_argument("--concurrency", type=int, default=16, help="conversations in flight")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, seconds: that it still runs")
    args = parser.parse_args(argv)
    if args.smoke:
        args.cycles, args.concurrency = 20, 2
    elif not 100 <= args.cycles <= 100_000 or not 1 <= args.concurrency <= 64:
        parser.error("keep it bounded: --cycles 100..100000, --concurrency 1..64")
    print(
        f"call_cost: server {named_server().rsplit('@', 1)[-1]}, {os.cpu_count()} cores, load average "
        f"{os.getloadavg()[0]:.2f}, {args.cycles} cycles x 2 calls per part, concurrency "
        f"{args.concurrency}, {time.strftime('%Y-%m-%d %H:%M:%S')}"
    )
    with tempfile.TemporaryDirectory(prefix="bench-call-cost-") as tmp, throwaway_database("cost") as url:
        http_cpu, http_failures = measure_http(url, args.cycles, args.concurrency, Path(tmp))
        parts, failures = measure_in_process(url, args.cycles, args.concurrency)
    http = _cpu_per_call(http_cpu, args.cycles)
    asgi = parts["asgi"] - parts["driver"]
    rows = [
        ("(1) service process over HTTP", http),
        ("(2) ASGI app, no HTTP server", asgi),
        ("(3) use case call_tool", parts["use_case"]),
        ("(4) statement (pool + psycopg)", parts["statement"]),
        ("(5) request checks", parts["checks"]),
        ("(6) one log line", parts["log"]),
        ("(7) one counter increment", parts["metric"]),
    ]
    print("\nCPU per tool call (us)")
    for label, value in rows:
        print(f"    {label:<36}{value:8.0f}")
    print("\nderived")
    print(f"    {'HTTP server (uvicorn) = (1)-(2)':<36}{http - asgi:8.0f}")
    litestar = asgi - parts["use_case"] - parts["checks"]
    print(f"    {'Litestar = (2)-(3)-(5)':<36}{litestar:8.0f}")
    rest = parts["use_case"] - parts["statement"] - parts["log"] - parts["metric"]
    print(f"    {'rest of the use case = (3)-(4)-(6)-(7)':<36}{rest:8.0f}")
    if http_failures or failures:
        print(f"FAILED: {http_failures + failures} wrong answers")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What one tool call costs the service's Python, in instructions: this checkout against the previous
release, counted by callgrind, so the figure does not depend on what else the machine does.

    .venv/bin/python -m bench.call_instructions [--previous COMMIT] [--cycles 100]

The previous release is checked out into a git worktree and runs on this checkout's virtualenv (as
``make upgrade`` runs it). Each release gets a database of its own on ``DATABASE_URL``'s server (or
the local one), migrated by that release, and the same work: its ASGI application, built as
``serve`` builds it (frozen for the collector where that release's ``serve`` freezes it), driven
in-process without an HTTP server (no sockets, no uvicorn) through start+interrupt cycles over four
conversations — Litestar's routing, the guard, body checks, the use case, the statement through
psycopg, the log lines, the metrics, the after-commit wake-ups (the loops that run on the clock, not
on calls, idle: ``_without_timed_loops``). Each runs twice under
``valgrind --tool=callgrind``, with 20 cycles and with ``20 + --cycles``; the difference divided by
the calls is one tool call without the start-up. What Postgres does is not counted here
(``bench.db_instructions`` counts it). Every call is checked; a wrong answer stops the bench. Takes
a few minutes: valgrind runs Python ~50x slower.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import shutil
import sys
import tempfile
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from service.settings import Settings

WARM = 20
CONVERSATIONS = 4
TOKEN = "bench-agent-token-0000000"


def bench_settings(url: str) -> Settings:
    """The service's settings as ``serve`` loads them on ``url``, with the benches' tokens (the
    Agent's is ``TOKEN``); imported from whichever release's ``service`` is on the path."""
    from service.settings import load_settings

    return load_settings(
        "serve",
        database_url=url,
        agent_token=TOKEN,
        host_token="bench-host-token-00000000",
        operator_token="bench-operator-token-0000",
    )


# The driver: run by path under valgrind with a release's tree first on PYTHONPATH, so it imports
# only what both releases have (``service``'s app, settings, manifests and logging).


def _drive(url: str, cycles: int, loop: str = "asyncio") -> None:
    import logging

    import service

    try:
        from service.app import create_app
    except ImportError:  # a release before the app was assembled outside the REST face
        from service.api.app import create_app  # type: ignore[no-redef,import-not-found]
    from service.logging import configure_logging
    from service.manifests import registry_of

    if not Path(service.__file__).resolve().is_relative_to(Path.cwd().resolve()):
        raise RuntimeError(f"imported {service.__file__}, not the release in {Path.cwd()}")
    settings = bench_settings(url)
    _without_timed_loops()
    try:  # as serve does at its start: traces only when the OTEL_* variables ask (--tracing)
        from service.telemetry import configure_tracing
    except ImportError:  # a release before traces
        pass
    else:
        configure_tracing("lineup-serve")
    app = create_app(settings, registry_of(settings), sweeper=False)
    if "gc.freeze()" in (Path.cwd() / "service" / "cli" / "serve.py").read_text():
        gc.freeze()  # as this release's serve does once its app is built
    with open(os.devnull, "w") as devnull:
        saved, sys.stderr = sys.stderr, devnull
        try:
            configure_logging(logging.INFO)  # the log lines as serve writes them, to /dev/null
            factory = None
            if loop == "uvloop":  # the event loop serve runs on (uvicorn's loop="uvloop")
                import uvloop

                factory = uvloop.new_event_loop
            with asyncio.Runner(loop_factory=factory) as runner:
                runner.run(_cycles(app, cycles))
        finally:
            sys.stderr = saved


def _without_timed_loops() -> None:
    """The loops that go round on the clock, not on calls — the maintenance samples and pruning,
    the history retention — wait for the stop and do nothing here: under valgrind a run lasts
    minutes, so a round of theirs would fall into one run of a pair and not the other, and be
    charged to the calls (a retention round alone is millions of instructions). What a call sets off
    (the wake-ups, the projection listener) still runs. Each release names its loops its own way."""
    import importlib

    async def idle(*args: Any) -> None:
        stop = next(arg for arg in args if isinstance(arg, asyncio.Event))
        await stop.wait()

    for module, name in (
        ("service.use_cases.maintenance", "Maintenance"),
        ("service.use_cases.history_retention", "HistoryPruning"),
    ):
        try:
            loop = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            continue
        loop.run = idle
    try:
        app_module = importlib.import_module("service.app")
    except ImportError:  # a release before the app was assembled outside the REST face
        app_module = importlib.import_module("service.api.app")
    if hasattr(app_module, "run_maintenance"):  # releases before the loops were classes
        setattr(app_module, "run_maintenance", idle)  # noqa: B010 - absent from this release


async def _cycles(app: Any, cycles: int) -> None:
    inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    outbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    lifespan = asyncio.ensure_future(
        app({"type": "lifespan", "asgi": {"version": "3.0"}}, inbox.get, outbox.put)
    )
    await inbox.put({"type": "lifespan.startup"})
    if (await outbox.get())["type"] != "lifespan.startup.complete":
        raise RuntimeError("the application did not start")
    run = uuid.uuid4().hex[:8]

    async def conversation(index: int) -> None:
        for n in range(index, cycles, CONVERSATIONS):
            for tool, expected in (("pomodoro.start", 202), ("pomodoro.interrupt", 200)):
                arguments = (
                    {"duration_seconds": 1500, "activity": "bench"} if tool == "pomodoro.start" else {}
                )
                body = {
                    "tool_call_id": f"i-{run}-{index}-{n}-{tool}",
                    "conversation_id": f"i-{run}-{index}",
                    "tool": tool,
                    "arguments": arguments,
                }
                status = await post_tool_call(app, json.dumps(body).encode())
                if status != expected:
                    raise RuntimeError(f"{tool} answered {status}, not {expected}")

    await asyncio.gather(*(conversation(i) for i in range(CONVERSATIONS)))
    await inbox.put({"type": "lifespan.shutdown"})
    await outbox.get()
    await lifespan


async def post_tool_call(app: Any, body: bytes, chunks: list[bytes] | None = None) -> int:
    """``POST /v1/tool-calls`` with ``body`` straight into the ASGI ``app`` (no socket, no HTTP
    parsing): the answer's status, and its body into ``chunks`` when given. The driver's (run in any
    release's tree) and ``bench.call_cost``'s."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/tool-calls",
        "raw_path": b"/v1/tool-calls",
        "root_path": "",
        "query_string": b"",
        "headers": [
            (b"host", b"bench"),
            (b"authorization", f"Bearer {TOKEN}".encode()),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
        "state": {},
    }
    received = False
    status = 0

    async def receive() -> dict[str, Any]:
        nonlocal received
        if received:
            await asyncio.Event().wait()
        received = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        elif chunks is not None and message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    await app(scope, receive, send)
    return status


# The bench: each release, two callgrind runs per figure.


def _instructions(
    tree: Path, url: str, cycles: int, work: Path, env: dict[str, str], loop: str = "asyncio"
) -> int:
    from bench.common import callgrind_total  # the bench's side only: the driver imports no bench

    # The driver imports only the release's code; ``env`` adds settings (DB_PREPARED_STATEMENTS).
    driver = ["--drive", url, "--cycles", str(cycles), "--loop", loop]
    return callgrind_total(Path(__file__).resolve(), driver, tree, work, env)


def per_call(
    tree: Path, url: str, cycles: int, work: Path, env: dict[str, str] | None = None, loop: str = "asyncio"
) -> float:
    """Python instructions per tool call of the release in ``tree`` (migrated into ``url``)."""
    short = _instructions(tree, url, WARM, work, env or {}, loop)
    long = _instructions(tree, url, WARM + cycles, work, env or {}, loop)
    return (long - short) / (2 * cycles)


def tracing_env(endpoint: str, ratio: float) -> dict[str, str]:
    """The OTEL_* variables of a traced run: OTLP/HTTP to ``endpoint``, ``ratio`` of the calls
    sampled (each call is a trace of its own: no caller's traceparent)."""
    return {
        "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
        "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
        "OTEL_TRACES_SAMPLER_ARG": str(ratio),
    }


class OtlpSink:
    """A collector's ``/v1/traces`` that reads each export and answers 200 (nothing decoded: only
    the exporting side is counted), on a free port of 127.0.0.1, in a thread of the bench."""

    def __init__(self) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length", "0")))
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def main() -> int:
    from harness.database import named_server, scratch_database
    from harness.processes import ROOT
    from harness.releases import PREVIOUS_RELEASE, migrate_release, previous_release

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--previous", default=PREVIOUS_RELEASE, help="the release to compare with")
    parser.add_argument(
        "--also", action="append", default=[], metavar="COMMIT", help="another commit to count (e.g. main)"
    )
    parser.add_argument("--cycles", type=int, default=100, help="measured start+interrupt cycles")
    parser.add_argument(
        "--loops",
        default="asyncio,uvloop",
        help="event loops to drive the apps on: asyncio (the figures before 2026-12-02), uvloop (serve's)",
    )
    parser.add_argument("--no-unprepared", action="store_true", help="skip DB_PREPARED_STATEMENTS=off")
    parser.add_argument(
        "--tracing",
        default="",
        help="also count this checkout with traces on, exported over OTLP/HTTP to a local sink that "
        "answers 200: comma-separated sampling ratios, e.g. 1,0.01,0 (1 = every call; 0 = none: "
        "what the instrumentation costs a call it does not sample, no export at all)",
    )
    parser.add_argument(
        "--jobs", type=int, default=1, help="figures counted at once (each is one process at a time)"
    )
    args = parser.parse_args()
    if not 10 <= args.cycles <= 2000:
        parser.error("keep it bounded: --cycles 10..2000")
    loops = [loop for loop in args.loops.split(",") if loop]
    if not loops or not set(loops) <= {"asyncio", "uvloop"}:
        parser.error("--loops: asyncio and/or uvloop")
    if shutil.which("valgrind") is None:
        print("needs valgrind (Debian: valgrind)")
        return 2
    ratios = [float(ratio) for ratio in args.tracing.split(",") if ratio]
    if not all(0 <= ratio <= 1 for ratio in ratios):
        parser.error("--tracing: sampling ratios in [0, 1]")
    work = Path(tempfile.mkdtemp(prefix="lineup-call-instructions-"))
    server = named_server()
    sink = OtlpSink() if ratios else None
    traced_names = [f"this, traced, sampled {ratio:g}" for ratio in ratios]
    figures: dict[tuple[str, str], float] = {}
    names = [
        f"previous release {args.previous[:12]}",
        *(f"commit {c[:12]}" for c in args.also),
        "this checkout",
    ]
    try:
        with contextlib.ExitStack() as stack, ThreadPoolExecutor(max_workers=args.jobs) as pool:
            releases = [stack.enter_context(previous_release(c)) for c in (args.previous, *args.also)]
            runs: list[tuple[str, Path, str, dict[str, str]]] = []
            for name, tree in zip(names, [*releases, ROOT], strict=True):
                url = stack.enter_context(scratch_database(server, f"bench_calls_{uuid.uuid4().hex[:8]}"))
                migrate_release(tree, url)
                runs += [(name, tree, url, {})]
            if not args.no_unprepared:
                url = stack.enter_context(scratch_database(server, f"bench_calls_off_{uuid.uuid4().hex[:8]}"))
                migrate_release(ROOT, url)
                runs += [("this, DB_PREPARED_STATEMENTS=off", ROOT, url, {"DB_PREPARED_STATEMENTS": "off"})]
            for name, sampled in zip(traced_names, ratios, strict=True):
                url = stack.enter_context(scratch_database(server, f"bench_calls_tr_{uuid.uuid4().hex[:8]}"))
                migrate_release(ROOT, url)
                runs += [(name, ROOT, url, tracing_env(sink.endpoint if sink else "", sampled))]
            jobs = {
                (name, loop): pool.submit(per_call, tree, url, args.cycles, work, env, loop)
                for name, tree, url, env in runs
                for loop in loops
            }
            figures = {key: job.result() for key, job in jobs.items()}
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if sink is not None:
            sink.close()
    print(
        f"call_instructions: Python instructions per tool call (in-process ASGI, {args.cycles} "
        f"start+interrupt cycles, callgrind), M"
    )
    print(f"    {'':40} " + " ".join(f"{loop:>9}" for loop in loops))
    base = names[0]
    unprepared = [] if args.no_unprepared else ["this, DB_PREPARED_STATEMENTS=off"]
    for name in [*names, *unprepared, *traced_names]:
        row = " ".join(f"{figures[name, loop] / 1e6:9.3f}" for loop in loops)
        ratio = " ".join(f"{figures[name, loop] / figures[base, loop]:8.3f}x" for loop in loops)
        print(f"    {name:40} {row}   / previous: {ratio}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--drive":
        _drive(sys.argv[2], int(sys.argv[4]), sys.argv[6] if len(sys.argv) > 6 else "asyncio")
        sys.exit(0)
    sys.exit(main())

"""The ASGI server, chosen by measurement: the service's CPU per tool call under uvicorn and granian.

    .venv/bin/python -m bench.asgi_servers [--cycles 3000] [--rounds 3] [--concurrency 16]

Needs granian, which the service does not depend on: ``.venv/bin/pip install 'granian[uvloop]==2.8.7'``
(the bench says so and exits 2 without it).

One fresh database; per round, in turn:

* **uvicorn** — ``python -m service serve`` as deployed (uvicorn, httptools, uvloop);
* **granian** — the same application, built as ``serve`` builds it (settings, manifests, the
  sweeper, ``gc.freeze``), served by granian's ASGI interface: one worker, uvloop, HTTP/1.1, its
  single-threaded runtime.

Each is driven by the same lean keep-alive client (``--concurrency`` conversations of
``pomodoro.start`` then ``pomodoro.interrupt``, every answer checked); after a warm-up, the CPU
(user + system, from /proc) of the server's whole process tree over ``--cycles`` cycles, per tool
call. Alternating within one run is what makes the two comparable on a shared machine; cycles/s is
printed too, but moves with the machine. Exits non-zero when an answer is wrong.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.call_cost import _cpu_per_call, _cycles
from bench.call_instructions import TOKEN
from bench.common import event_loop, process_cpu, tool_poster
from harness.database import throwaway_database
from harness.http_client import HttpClient
from harness.processes import ROOT, free_port, running_service, spawn, stop, wait_http

GRANIAN = "granian[uvloop]==2.8.7"


def granian_app() -> Any:
    """The service's application as ``serve`` builds it (granian's factory target)."""
    from service.app import create_app
    from service.logging import configure_logging
    from service.manifests import registry_of
    from service.settings import load_settings

    configure_logging()
    settings = load_settings("serve")
    app = create_app(settings, registry_of(settings), sweeper=True)
    gc.freeze()
    return app


def _serve_granian(port: int) -> None:
    from granian import Granian
    from granian.constants import HTTPModes, Interfaces, Loops, RuntimeModes
    from granian.log import LogLevels

    Granian(
        "bench.asgi_servers:granian_app",
        factory=True,
        address="127.0.0.1",
        port=port,
        interface=Interfaces.ASGI,
        workers=1,
        loop=Loops.uvloop,
        http=HTTPModes.http1,
        runtime_mode=RuntimeModes.st,
        websockets=False,
        log_level=LogLevels.warning,
        working_dir=ROOT,
    ).serve()


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants (granian serves from a worker process)."""
    pids = [pid]
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            pids += _tree(int(child))
    return pids


def _drive(base_url: str, pid: int, cycles: int, concurrency: int) -> tuple[float, float, int]:
    """(CPU µs per call of ``pid``'s tree, cycles/s, wrong answers)."""
    clients = [HttpClient(base_url, TOKEN) for _ in range(concurrency)]
    calls = [tool_poster(client) for client in clients]

    async def go() -> tuple[float, float, int]:
        await _cycles(calls, concurrency * 20)  # warm-up: prepared statements, pools
        pids = _tree(pid)
        before, began = sum(map(process_cpu, pids)), time.monotonic()
        failures = await _cycles(calls, cycles)
        spent, wall = sum(map(process_cpu, pids)) - before, time.monotonic() - began
        for client in clients:
            await client.close()
        return _cpu_per_call(spent, cycles), cycles / wall, failures

    with event_loop() as runner:
        return runner.run(go())


@contextmanager
def _granian(url: str, log_dir: Path) -> Iterator[tuple[str, int]]:
    port = free_port()
    settings = {
        "DATABASE_URL": url,
        "AGENT_TOKEN": TOKEN,
        "HOST_TOKEN": f"host-{port}-bench-asgi-servers",
        "OPERATOR_TOKEN": f"operator-{port}-bench-asgi-servers",
    }
    process = spawn(
        ["-m", "bench.asgi_servers", "--serve-granian", str(port)], settings, log_dir / "granian.log"
    )
    try:
        wait_http(f"http://127.0.0.1:{port}/readyz", 60, process, status=200)
        yield f"http://127.0.0.1:{port}", process.pid
    finally:
        stop(process, 20)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cycles", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--serve-granian", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if importlib.util.find_spec("granian") is None:
        print(f"error: this bench needs granian: .venv/bin/pip install '{GRANIAN}'", file=sys.stderr)
        return 2
    if args.serve_granian:
        _serve_granian(args.serve_granian)
        return 0
    figures: dict[str, list[tuple[float, float]]] = {"uvicorn": [], "granian": []}
    failures = 0
    with tempfile.TemporaryDirectory(prefix="asgi-servers-") as logs, throwaway_database("asgi") as url:
        log_dir = Path(logs)
        for round_ in range(1, args.rounds + 1):
            with running_service(url, log_dir, env={"AGENT_TOKEN": TOKEN}) as service:
                per_call, rate, wrong = _drive(service.base_url, service.pid, args.cycles, args.concurrency)
                figures["uvicorn"].append((per_call, rate))
                failures += wrong
                print(
                    f"round {round_}  uvicorn  {per_call:6.1f} µs per call  {rate:6.1f} cycles/s", flush=True
                )
            with _granian(url, log_dir) as (base_url, pid):
                per_call, rate, wrong = _drive(base_url, pid, args.cycles, args.concurrency)
                figures["granian"].append((per_call, rate))
                failures += wrong
                print(
                    f"round {round_}  granian  {per_call:6.1f} µs per call  {rate:6.1f} cycles/s", flush=True
                )
    uvicorn = statistics.median(per_call for per_call, _ in figures["uvicorn"])
    granian = statistics.median(per_call for per_call, _ in figures["granian"])
    print(
        f"median CPU per tool call: uvicorn {uvicorn:.1f} µs, granian {granian:.1f} µs "
        f"(granian / uvicorn {granian / uvicorn:.2f}); wrong answers: {failures}"
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

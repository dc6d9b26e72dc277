"""Where a tool call's Python goes, layer by layer: every bytecode the interpreter runs per call,
counted (``sys.settrace`` with opcode events, so the figure is exact and the machine's load does not
move it) and charged to the layer of the code running it — the event loop, Litestar, the body
checks, the use case, psycopg, logging, metrics. Helpers of the standard library (``contextlib``,
dataclasses' ``__init__``, ``typing``) are charged to the layer that called them.

    .venv/bin/python -m bench.layer_profile [--cycles 100] [--loop uvloop|asyncio] [--functions 30]

The work is ``bench.call_instructions``' (the app as ``serve`` builds it, driven in-process through
start+interrupt cycles, no HTTP server), on a throwaway database. Bytecodes are not instructions:
C code (msgspec, psycopg's C parts, libpq, uvloop, hashlib) runs none, so a layer that works in C
weighs less here than in callgrind's count. Read the shares beside ``bench.call_instructions``' total.
"""

from __future__ import annotations

import argparse
import collections
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import bench.call_instructions as driver

# The layer of a code file, by the first pattern its path contains (checked in order).
LAYERS = (
    ("service/api/bodies.py", "body parsing and schema checks"),
    ("service/json_errors.py", "body parsing and schema checks"),
    ("service/domain/text.py", "body parsing and schema checks"),
    ("service/manifests.py", "body parsing and schema checks"),
    ("/jsonschema", "body parsing and schema checks"),
    ("/pydantic", "body parsing and schema checks"),
    ("service/api/auth.py", "credentials check"),
    ("service/http.py", "credentials check"),
    ("/hmac.py", "credentials check"),
    ("/litestar/", "Litestar: routing, request, DI, response"),
    ("service/api/", "Litestar: routing, request, DI, response"),
    ("/structlog/", "logging"),
    ("service/logging.py", "logging"),
    ("/prometheus_client/", "metrics"),
    ("service/metrics.py", "metrics"),
    ("/psycopg_pool/", "psycopg: pool, encode, send, decode"),
    ("/psycopg/", "psycopg: pool, encode, send, decode"),
    ("service/db/", "psycopg: pool, encode, send, decode"),
    ("service/wakeups.py", "after-commit wake-ups and background loops"),
    ("service/projection_hub.py", "after-commit wake-ups and background loops"),
    ("service/listen.py", "after-commit wake-ups and background loops"),
    ("service/background.py", "after-commit wake-ups and background loops"),
    ("service/use_cases/maintenance.py", "after-commit wake-ups and background loops"),
    ("service/use_cases/history_retention.py", "after-commit wake-ups and background loops"),
    ("service/", "the use case (checks, fingerprint, unit of work)"),
    ("/asyncio/", "event loop (asyncio's Python; uvloop's is C)"),
    ("/selectors.py", "event loop (asyncio's Python; uvloop's is C)"),
    ("bench/call_instructions.py", "the bench's driver (the ASGI server's place)"),
)


def layer_of(filename: str) -> str | None:
    for pattern, layer in LAYERS:
        if pattern in filename:
            return layer
    return None


class Counter:
    """Opcodes per layer and per function, while ``on`` is set."""

    def __init__(self) -> None:
        self.layers: collections.Counter[str] = collections.Counter()
        self.functions: collections.Counter[str] = collections.Counter()
        self._frames: dict[int, str] = {}

    def trace(self, frame: FrameType, event: str, arg: Any) -> Callable[..., Any] | None:
        if event != "call":
            return None
        code = frame.f_code
        layer = layer_of(code.co_filename)
        if layer is None:  # a helper: the layer of whoever called it
            caller = frame.f_back
            layer = self._frames.get(id(caller), "other") if caller is not None else "other"
        self._frames[id(frame)] = layer
        frame.f_trace_opcodes = True
        name = f"{_short(code.co_filename)}:{code.co_name}"
        layers, functions, frames = self.layers, self.functions, self._frames

        def local(frame: FrameType, event: str, arg: Any) -> Callable[..., Any] | None:
            if event == "opcode":
                layers[layer] += 1
                functions[name] += 1
            elif event == "return":
                frames.pop(id(frame), None)
            return local

        return local


def _short(filename: str) -> str:
    for marker in ("site-packages/", "lib/python3.11/", str(Path.cwd()) + "/"):
        if marker in filename:
            return filename.split(marker, 1)[1]
    return filename


def main() -> int:
    from harness.database import named_server, scratch_database
    from harness.processes import ROOT
    from harness.releases import migrate_release

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cycles", type=int, default=100)
    parser.add_argument("--loop", choices=("uvloop", "asyncio"), default="uvloop")
    parser.add_argument("--functions", type=int, default=30, help="how many functions to list")
    args = parser.parse_args()
    counter = Counter()
    warm = 10
    posts = [0]
    post = driver.post_tool_call

    async def counted(app: Any, body: bytes) -> int:
        posts[0] += 1
        if posts[0] == 2 * warm + 1:
            sys.settrace(counter.trace)
        status = await post(app, body)
        if posts[0] == 2 * (warm + args.cycles):
            sys.settrace(None)
        return status

    driver.post_tool_call = counted  # type: ignore[assignment]
    with scratch_database(named_server(), f"bench_layers_{uuid.uuid4().hex[:8]}") as url:
        migrate_release(ROOT, url)
        driver._drive(url, warm + args.cycles + 1, args.loop)
    calls = 2 * args.cycles
    total = sum(counter.layers.values())
    print(
        f"layer_profile: Python bytecodes per tool call ({args.cycles} start+interrupt cycles, "
        f"{args.loop}): {total / calls:,.0f}"
    )
    for layer, count in counter.layers.most_common():
        print(f"    {count / calls:8,.0f}  {100 * count / total:5.1f} %  {layer}")
    print(f"  the {args.functions} functions running the most bytecodes per call (their own):")
    for name, count in counter.functions.most_common(args.functions):
        print(f"    {count / calls:8,.0f}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""CPU of one tool call over MCP beside the same call over REST, in one service process.

    .venv/bin/python -m bench.mcp_cost [--cycles 1000] [--rounds 5] [--concurrency 8]

One ``python -m service serve`` on a fresh database; cycles of ``pomodoro.start`` then
``pomodoro.interrupt`` per conversation, ``--concurrency`` workers each on its own keep-alive
connection, driven in interleaved rounds through each face:

  rest           ``POST /v1/tool-calls``
  mcp            ``tools/call`` on a handshake-era MCP session (``initialize`` once per worker,
                 protocol 2025-11-25, the session id on every request)
  mcp-task       the same, each start run as an MCP task (``params.task``): it answers a
                 ``CreateTaskResult`` and is watched until it settles, to push
                 ``notifications/tasks/status`` to the session (one read per operation)
  mcp-2026       ``tools/call`` at protocol 2026-07-28 (no session: every request carries its
                 version, client info and capabilities in ``_meta``)
  mcp-2026-task  the same, the request declaring the tasks extension ``io.modelcontextprotocol/tasks``:
                 each start answers a ``CreateTaskResult``

Then reads of a focusing operation, interleaved the same way: REST ``GET /v1/operations/{id}``
against MCP ``tasks/get`` at 2026-07-28 (the task of a start above), the MCP App's reads at
2026-07-28 — ``resources/read`` of ``ui://pomodoro/timer`` and the View's app-only
``pomodoro.app.read`` of the same operation, with the View token its start's result carried — CPU
per read and the ratio. ``--reads-only`` skips
the tool calls.

Each figure is the service process's CPU (user + system, from /proc) per tool call. The machine is
shared, so the faces take turns round by round, and a face's ratio is the median over the rounds of
its figure divided by the REST figure of the same round. The client is a minimal HTTP/1.1 one, so
the bench takes as little CPU as it can from the two cores it shares with the service and Postgres.
Exits non-zero when an answer is wrong.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import statistics
import sys
import tempfile
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bench.common import event_loop
from harness.database import named_server, throwaway_database
from harness.http_client import HttpClient
from harness.measure import process_cpu
from harness.processes import running_service

Call = Callable[[str, str, str, dict[str, Any]], Awaitable[int]]
LEGACY = "2025-11-25"
MODERN = "2026-07-28"
CLIENT_INFO = {"name": "bench-mcp-cost", "version": "0"}
TASKS = "io.modelcontextprotocol/tasks"
UI = "io.modelcontextprotocol/ui"
VIEW_TOKEN = "io.lineup/view_token"
APP_SECRET = "bench-mcp-app-secret-Qw9Er8Ty7Ui6Op5As4Df3"


ACCEPT = {"Accept": "application/json, text/event-stream"}


def rest_call(connection: HttpClient) -> Call:
    async def call(conversation: str, tool_call_id: str, tool: str, arguments: dict[str, Any]) -> int:
        body = {
            "tool_call_id": tool_call_id,
            "conversation_id": conversation,
            "tool": tool,
            "arguments": arguments,
        }
        return (await connection.post("/v1/tool-calls", body, ACCEPT)).status

    return call


class McpSession:
    """JSON-RPC over the streamable HTTP transport, answers as JSON bodies."""

    def __init__(
        self, connection: HttpClient, version: str, *, tasks: bool = False, apps: bool = False
    ) -> None:
        self._connection = connection
        self._version = version
        self._tasks = tasks  # starts run as tasks
        self._apps = apps  # the client renders MCP Apps (io.modelcontextprotocol/ui)
        self._session_id: str | None = None
        self._next_id = 0
        self.last_task_id = ""
        self.last_view_token = ""

    async def open(self) -> McpSession:
        if self._version == LEGACY:
            capabilities: dict[str, Any] = {"tasks": {}} if self._tasks else {}
            params = {"protocolVersion": LEGACY, "capabilities": capabilities, "clientInfo": CLIENT_INFO}
            await self._rpc("initialize", params, version=None)
            await self._rpc("notifications/initialized", {}, notification=True)
        return self

    async def _rpc(
        self,
        method: str,
        params: dict[str, Any],
        *,
        version: str | None = "",
        notification: bool = False,
        name: str | None = None,
    ) -> Any:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
        if not notification:
            self._next_id += 1
            message["id"] = self._next_id
        headers = dict(ACCEPT)
        if version is not None:
            headers["MCP-Protocol-Version"] = self._version
        if self._session_id is not None:
            headers["Mcp-Session-Id"] = self._session_id
        if self._version == MODERN:
            headers["Mcp-Method"] = method
            if name is not None or "name" in params:
                headers["Mcp-Name"] = name if name is not None else params["name"]
        status, answer_headers, data = await self._connection.post("/mcp", message, headers)
        self._session_id = answer_headers.get("mcp-session-id", self._session_id)
        body = json.loads(data) if data else None
        if notification:
            if status != 202:
                raise RuntimeError(f"{method}: HTTP {status}")
            return None
        if status != 200 or not isinstance(body, dict) or "result" not in body:
            raise RuntimeError(f"{method}: HTTP {status} {json.dumps(body)[:300]}")
        return body["result"]

    async def call(self, conversation: str, tool_call_id: str, tool: str, arguments: dict[str, Any]) -> int:
        meta: dict[str, Any] = {
            "io.lineup/conversation_id": conversation,
            "io.lineup/tool_call_id": tool_call_id,
        }
        if self._version == MODERN:
            meta.update(self._envelope())
        params: dict[str, Any] = {"name": tool, "arguments": arguments, "_meta": meta}
        if self._tasks and tool == "pomodoro.start" and self._version == LEGACY:
            params["task"] = {}
        result = await self._rpc("tools/call", params)
        if self._tasks and tool == "pomodoro.start":
            task = result.get("task", {}) if self._version == LEGACY else result
            if task.get("status") != "working":
                raise RuntimeError(f"not a working task: {json.dumps(result)[:300]}")
            self.last_task_id = task["taskId"]
        if self._apps:
            self.last_view_token = result["_meta"][VIEW_TOKEN]
        return int(result["_meta"]["io.lineup/http_status"])

    def _envelope(self) -> dict[str, Any]:
        extensions: dict[str, Any] = {TASKS: {}} if self._tasks else {}
        if self._apps:
            extensions[UI] = {"mimeTypes": ["text/html;profile=mcp-app"]}
        capabilities: dict[str, Any] = {"extensions": extensions} if extensions else {}
        return {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
            "io.modelcontextprotocol/clientCapabilities": capabilities,
        }

    async def read_view(self) -> int:
        """``resources/read`` of the Pomodoro View; the length of its document."""
        params = {"uri": "ui://pomodoro/timer", "_meta": self._envelope()}
        result = await self._rpc("resources/read", params, name="ui://pomodoro/timer")
        return len(result["contents"][0]["text"])

    async def app_read(self, view_token: str) -> str:
        """The View's ``pomodoro.app.read`` (visibility ["app"]) with the View token of its start; the
        operation's state."""
        params = {"name": "pomodoro.app.read", "arguments": {"view_token": view_token}}
        result = await self._rpc("tools/call", {**params, "_meta": self._envelope()})
        return str(result["structuredContent"]["operation"]["state"])

    async def get_task(self, task_id: str) -> str:
        """``tasks/get`` at 2026-07-28; the task's status."""
        task = await self._rpc("tasks/get", {"taskId": task_id, "_meta": self._envelope()}, name=task_id)
        return str(task["status"])


async def cycles(calls: list[Call], count: int, label: str) -> int:
    """``count`` start+interrupt cycles spread over the callers, one conversation each; failures."""
    run = uuid.uuid4().hex[:8]
    failures = 0

    async def worker(index: int) -> None:
        nonlocal failures
        conversation = f"{label}-{run}-{index}"
        for n in range(index, count, len(calls)):
            for tool, arguments, expected in (
                ("pomodoro.start", {"duration_seconds": 1500, "activity": "bench"}, 202),
                ("pomodoro.interrupt", {}, 200),
            ):
                status = await calls[index](conversation, f"{conversation}-{n}-{tool}", tool, arguments)
                failures += status != expected

    await asyncio.gather(*(worker(i) for i in range(len(calls))))
    return failures


async def faces(
    base_url: str, token: str, concurrency: int
) -> tuple[dict[str, list[Call]], list[HttpClient]]:
    connections: list[HttpClient] = []

    def connection() -> HttpClient:
        connections.append(HttpClient(base_url, token))
        return connections[-1]

    built: dict[str, list[Call]] = {"rest": [rest_call(connection()) for _ in range(concurrency)]}
    for name, version, tasks in (
        ("mcp", LEGACY, False),
        ("mcp-task", LEGACY, True),
        ("mcp-2026", MODERN, False),
        ("mcp-2026-task", MODERN, True),
    ):
        sessions = [await McpSession(connection(), version, tasks=tasks).open() for _ in range(concurrency)]
        built[name] = [session.call for session in sessions]
    return built, connections


async def read_costs(
    base_url: str, token: str, pid: int, concurrency: int, reads_per_round: int, rounds: int
) -> tuple[dict[str, list[float]], int]:
    """CPU per read of a focusing operation: REST ``GET /v1/operations/{id}`` and ``tasks/get``."""
    run = uuid.uuid4().hex[:8]
    connections = [HttpClient(base_url, token) for _ in range(2 * concurrency + 1)]
    starter = await McpSession(connections[-1], MODERN, tasks=True, apps=True).open()
    task_ids, view_tokens = [], []
    for index in range(concurrency):
        conversation = f"reads-{run}-{index}"
        await starter.call(conversation, conversation, "pomodoro.start", {"duration_seconds": 3600})
        task_ids.append(starter.last_task_id)
        view_tokens.append(starter.last_view_token)
    sessions = [McpSession(connections[concurrency + i], MODERN, tasks=True) for i in range(concurrency)]

    async def rest(index: int) -> bool:
        answer = await connections[index].request("GET", f"/v1/operations/{task_ids[index]}", headers=ACCEPT)
        return answer.status == 200 and answer.json()["state"] == "focusing"

    async def mcp(index: int) -> bool:
        return await sessions[index].get_task(task_ids[index]) == "working"

    async def view(index: int) -> bool:
        return await sessions[index].read_view() > 0

    async def app_read(index: int) -> bool:
        return await sessions[index].app_read(view_tokens[index]) == "focusing"

    faces_: dict[str, Callable[[int], Awaitable[bool]]] = {
        "rest-get": rest,
        "tasks/get": mcp,
        "resources/read": view,
        "app-read": app_read,
    }
    failures = 0

    async def reads(read: Callable[[int], Awaitable[bool]], count: int) -> int:
        async def worker(index: int) -> int:
            return sum([not await read(index) for _ in range(index, count, concurrency)])

        return sum(await asyncio.gather(*(worker(i) for i in range(concurrency))))

    per_read: dict[str, list[float]] = {name: [] for name in faces_}
    for read in faces_.values():  # warm-up
        failures += await reads(read, concurrency * 20)
    for _ in range(rounds):
        for name, read in faces_.items():
            before = process_cpu(pid)
            failures += await reads(read, reads_per_round)
            per_read[name].append((process_cpu(pid) - before) / reads_per_round * 1e6)
    for connection in connections:
        await connection.close()
    return per_read, failures


def measure(
    url: str, cycles_per_round: int, rounds: int, concurrency: int, log_dir: Path, *, with_calls: bool = True
) -> tuple[dict[str, list[float]], dict[str, list[float]], int]:
    # A key for the MCP App View's tokens (the app read hands its start's token back).
    with running_service(url, log_dir, env={"MCP_APP_SECRET": APP_SECRET}) as service:

        async def go() -> tuple[dict[str, list[float]], dict[str, list[float]], int]:
            built, connections = await faces(service.base_url, service.agent_token, concurrency)
            if not with_calls:
                built = {}
            per_call: dict[str, list[float]] = {name: [] for name in built}
            failures = 0
            for name, calls in built.items():  # warm-up: prepared statements, pools, sessions
                failures += await cycles(calls, concurrency * 4, name)
            for _ in range(rounds):
                for name, calls in built.items():
                    before = process_cpu(service.pid)
                    failures += await cycles(calls, cycles_per_round, name)
                    spent = process_cpu(service.pid) - before
                    per_call[name].append(spent / (2 * cycles_per_round) * 1e6)
            for connection in connections:
                await connection.close()
            per_read, read_failures = await read_costs(
                service.base_url,
                service.agent_token,
                service.pid,
                concurrency,
                2 * cycles_per_round,
                rounds,
            )
            return per_call, per_read, failures + read_failures

        with event_loop() as runner:
            return runner.run(go())


def ratio_of(values: list[float], bases: list[float]) -> float:
    """The median over rounds of ``value / base``; NaN when a round's base read no CPU at all (the
    kernel counts CPU in 10 ms ticks, which a ``--smoke`` round's few calls may not reach)."""
    pairs = [value / base for value, base in zip(values, bases, strict=True) if base > 0]
    return statistics.median(pairs) if pairs else math.nan


def ratios(figures: dict[str, list[float]], base: str) -> float:
    """Print each face's median and its ratio to ``base`` (median over rounds); the worst ratio."""
    print(f"  {'face':<14} {'median us':>10} {'rounds':>32} {'x ' + base:>9}")
    worst = 0.0
    for name, values in figures.items():
        ratio = ratio_of(values, figures[base])
        if name != base and not math.isnan(ratio):
            worst = max(worst, ratio)
        rounds = " ".join(f"{value:.0f}" for value in values)
        print(f"  {name:<14} {statistics.median(values):>10.0f} {rounds:>32} {ratio:>9.2f}")
    return worst


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cycles", type=int, default=1000, help="start+interrupt cycles per face per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--reads-only", action="store_true", help="only the reads, not the tool calls")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, seconds: that it still runs")
    args = parser.parse_args(argv)
    if args.smoke:
        args.cycles, args.rounds, args.concurrency = 10, 1, 2
    print(f"database server: {named_server()}")
    with tempfile.TemporaryDirectory(prefix="bench-mcp-cost-") as tmp, throwaway_database("mcp_cost") as url:
        per_call, per_read, failures = measure(
            url, args.cycles, args.rounds, args.concurrency, Path(tmp), with_calls=not args.reads_only
        )
    if per_call:
        print(
            f"\nservice CPU per tool call, {args.rounds} interleaved rounds of {args.cycles} cycles, "
            f"{args.concurrency} workers (ratio: the median of each round's figure over that round's REST):"
        )
        worst = ratios(per_call, "rest")
        print(f"\nMCP / REST, the worst MCP face: {worst:.2f} times (aim: at most 2)")
    print(f"\nservice CPU per read of a focusing operation, {2 * args.cycles} reads a round:")
    ratios(per_read, "rest-get")
    for face, aim in (("tasks/get", 1.2), ("resources/read", 1.5), ("app-read", 1.5)):
        ratio = ratio_of(per_read[face], per_read["rest-get"])
        print(f"{face} / GET /v1/operations/{{id}}: {ratio:.2f} times (aim: at most {aim})")
    if failures:
        print(f"FAILED: {failures} wrong answers", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

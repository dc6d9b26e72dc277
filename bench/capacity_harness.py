"""What ``bench.capacity``'s units run on: the requests and the answers they expect, and the
harness (the probe connection, the HTTP clients, a measured window)."""

from __future__ import annotations

import asyncio
import json
import secrets
import time
import uuid
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from bench import seeds
from bench.capacity_figures import Row, per_unit
from bench.measured_server import postmaster_pid
from bench.server_usage import UsageMeter
from harness.http_client import HttpClient
from harness.postgres import Postgres
from harness.processes import ServiceProcess

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


class Harness:
    """The server, the service, its clients; a unit's window measured as one ``Row``."""

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

    def pad(self, pomodoros: int) -> None:
        """Finished history: Pomodoros started and interrupted through the service's statement,
        eight per conversation, their results delivered through the relay's statements
        (``bench.seeds``)."""
        seeds.finished(self.url, f"old-{secrets.token_hex(3)}-", max(1, pomodoros // 8), 8)
        seeds.deliver_all(self.url)
        # Vacuumed now, so that autovacuum does not run inside the window that follows.
        self.probe.execute(f"VACUUM ANALYZE /* {PROBE} */")

    def wait_until(self, done: Callable[[], bool], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            if time.monotonic() > deadline:
                raise TimeoutError("the bench waited in vain")
            time.sleep(0.05)


async def started(coro: Coroutine[Any, Any, Any], opened: asyncio.Event) -> asyncio.Task[Any]:
    task = asyncio.ensure_future(coro)
    await asyncio.wait_for(opened.wait(), 10)
    return task


async def finish(task: asyncio.Task[Any]) -> None:
    await task

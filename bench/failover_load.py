"""Load, processes and checks shared by the failover rig (``bench/failover.py``) and the chaos bench
(``bench/chaos.py``).

* ``Agents``: several Agents, each opening Pomodoros in conversations of its own and ending them
  every way there is — the Agent's interrupt, the person leaving, the app closed, the deadline (and
  a late interrupt after it). Every call that gets no answer (a 503, a refused or cut connection) is
  sent again, the same body under the same ``tool_call_id``, until it is answered.
* ``Probe``: one write per 50 ms (an interrupt in an empty conversation, a recorded answer), so the
  seconds without a working write are measured to a tenth of a second.
* ``Receiver``: the receiving Agent, in this process: counts every delivery per ``webhook-id`` and
  can fail a share of them (503) to make the relays retry.
* ``ServiceProcess`` / ``RelayProcess``: ``python -m service serve`` and ``python -m relay`` that
  can be SIGKILLed and started again (on the same port, with the same relay id).
* ``check``: what must hold afterwards, read from the database (through the multi-host URL, so on
  the primary of the moment).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import os
import random
import secrets
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row

from bench.common import ROOT, free_port

Answer = tuple[int, dict[str, str], bytes]
ENDINGS = ("interrupt", "leave", "close", "deadline")
NOT_RECORDED = (401, 404, 422)  # answers the contract does not record
IDLE_REUSE = 4.0  # reuse a keep-alive connection only if it was used this recently (uvicorn: 5 s)
GIVE_UP_AFTER = 90.0  # a call unanswered this long is a failure of the run


class Http:
    """A minimal HTTP/1.1 keep-alive client: one request at a time, JSON bodies, raw bytes back."""

    def __init__(self, port: int, token: str) -> None:
        self.port = port
        self.token = token
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._last_used = 0.0

    async def request(
        self, method: str, path: str, body: bytes | None = None, within: float = 30.0
    ) -> Answer:
        if self._writer is not None and time.monotonic() - self._last_used > IDLE_REUSE:
            await self.close()  # the server ends idle keep-alive connections after 5 s (uvicorn)
        try:
            async with asyncio.timeout(within):
                return await self._request(method, path, body)
        except BaseException:
            await self.close()  # the stream may be mid-answer: start afresh next time
            raise

    async def _request(self, method: str, path: str, body: bytes | None) -> Answer:
        if self._reader is None or self._writer is None:
            self._reader, self._writer = await asyncio.open_connection("127.0.0.1", self.port)
        payload = body or b""
        self._writer.write(
            f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\n"
            f"Authorization: Bearer {self.token}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(payload)}\r\n\r\n".encode()
            + payload
        )
        head = await self._reader.readuntil(b"\r\n\r\n")
        status = int(head[9:12])
        headers: dict[str, str] = {}
        for line in head.decode("latin-1").split("\r\n")[1:]:
            name, _, value = line.partition(":")
            if name:
                headers[name.strip().lower()] = value.strip()
        data = await self._reader.readexactly(int(headers.get("content-length", "0")))
        self._last_used = time.monotonic()
        if headers.get("connection", "").lower() == "close":
            await self.close()
        return status, headers, data

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            with contextlib.suppress(OSError):
                await self._writer.wait_closed()
        self._reader = self._writer = None


@dataclass
class Figures:
    calls: int = 0  # calls answered (tool calls and Host calls), each once however often it was sent
    statuses: Counter[int] = field(default_factory=Counter)
    retried_calls: int = 0  # calls that needed at least one more send
    unanswered_sends: Counter[str] = field(default_factory=Counter)  # 503, refused, cut, timeout
    cycles: int = 0
    endings: Counter[str] = field(default_factory=Counter)
    # tool_call_id -> (status, body bytes): every answer the Agents were given
    acknowledged: dict[str, tuple[int, bytes]] = field(default_factory=dict)
    # what the Host was told about an operation it ended: (operation_id, state)
    host_told: list[tuple[str, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def starts(self) -> int:
        return sum(
            1
            for tool_call_id, (status, _) in self.acknowledged.items()
            if tool_call_id.endswith("-start") and status == 202
        )


class Caller:
    """Sends a call until it is answered: 503 (honouring Retry-After up to ``max_pause``), refused,
    cut or timed-out sends are repeated with the same body."""

    def __init__(self, port: int, token: str, figures: Figures, *, max_pause: float = 1.0) -> None:
        self.http = Http(port, token)
        self.figures = figures
        self.max_pause = max_pause

    async def __call__(self, method: str, path: str, payload: dict[str, Any]) -> tuple[int, bytes]:
        body = json.dumps(payload, separators=(",", ":")).encode()
        give_up = time.monotonic() + GIVE_UP_AFTER
        retried = False
        while True:
            pause = 0.05
            try:
                status, headers, data = await self.http.request(method, path, body)
            except (OSError, asyncio.IncompleteReadError, TimeoutError) as exc:
                kind = "timeout" if isinstance(exc, TimeoutError) else type(exc).__name__
                self.figures.unanswered_sends[kind] += 1
            else:
                if status != 503:
                    self.figures.calls += 1
                    self.figures.statuses[status] += 1
                    self.figures.retried_calls += retried
                    if status >= 500:
                        self.figures.errors.append(f"{method} {path}: HTTP {status} {data[:300]!r}")
                    return status, data
                self.figures.unanswered_sends["503"] += 1
                pause = min(float(headers.get("retry-after", "1")), self.max_pause)
            retried = True
            if time.monotonic() > give_up:
                raise RuntimeError(f"{method} {path} unanswered for {GIVE_UP_AFTER:.0f} s")
            await asyncio.sleep(pause * random.uniform(0.5, 1.0))


def interrupt(tool_call_id: str, conversation: str) -> dict[str, Any]:
    """The body of a ``pomodoro.interrupt`` call."""
    return {
        "tool_call_id": tool_call_id,
        "conversation_id": conversation,
        "tool": "pomodoro.interrupt",
        "arguments": {},
    }


class Agents:
    """``count`` Agents (and the Host acting for their people) until ``stop`` is set."""

    def __init__(self, port: int, agent_token: str, host_token: str, figures: Figures, *, count: int) -> None:
        self.port = port
        self.agent_token = agent_token
        self.host_token = host_token
        self.figures = figures
        self.count = count
        self.run_id = secrets.token_hex(3)

    async def run(self, stop: asyncio.Event) -> None:
        await asyncio.gather(*(self._agent(n, stop) for n in range(self.count)))

    async def _agent(self, n: int, stop: asyncio.Event) -> None:
        agent = Caller(self.port, self.agent_token, self.figures)
        host = Caller(self.port, self.host_token, self.figures)
        rng = random.Random(f"{self.run_id}-{n}")
        cycle = 0
        try:
            while not stop.is_set():
                try:
                    await self._cycle(agent, host, rng, f"load-{self.run_id}-{n}-{cycle}")
                except RuntimeError as exc:
                    self.figures.errors.append(str(exc))
                    return
                cycle += 1
        finally:
            await agent.http.close()
            await host.http.close()

    async def _cycle(self, agent: Caller, host: Caller, rng: random.Random, conversation: str) -> None:
        figures = self.figures
        duration = rng.choice((1, 2, 3))
        start_id = f"{conversation}-start"
        status, body = await agent(
            "POST",
            "/v1/tool-calls",
            {
                "tool_call_id": start_id,
                "conversation_id": conversation,
                "tool": "pomodoro.start",
                "arguments": {"duration_seconds": duration, "activity": "failover load"},
            },
        )
        figures.acknowledged[start_id] = (status, body)
        if status != 202:
            figures.errors.append(f"start {start_id}: HTTP {status} {body[:200]!r}")
            return
        started = json.loads(body)
        ending = rng.choice(ENDINGS)
        await asyncio.sleep(rng.uniform(0.0, duration * 0.7) if ending != "deadline" else duration + 0.2)
        if ending in ("interrupt", "deadline"):
            # After the deadline the interrupt answers operation_already_final (the late window).
            interrupt_id = f"{conversation}-interrupt"
            status, body = await agent("POST", "/v1/tool-calls", interrupt(interrupt_id, conversation))
            figures.acknowledged[interrupt_id] = (status, body)
        elif ending == "leave":
            status, body = await host(
                "POST", f"/v1/host/conversations/{conversation}/workspace/foreground", {"target": "interact"}
            )
        else:
            status, body = await host("POST", f"/v1/host/instances/{started['instance_id']}/close", {})
            if status == 200 and (told := json.loads(body).get("operation")):
                figures.host_told.append((told["operation_id"], told["state"]))
        if status != 200:
            figures.errors.append(f"{ending} in {conversation}: HTTP {status} {body[:200]!r}")
        figures.cycles += 1
        figures.endings[ending] += 1


class Probe:
    """One recorded write every ``interval`` s; the gaps between successes are the unavailability."""

    def __init__(self, port: int, agent_token: str, interval: float = 0.05) -> None:
        self.http = Http(port, agent_token)
        self.interval = interval
        self.successes: list[float] = []
        self.statuses: Counter[int | str] = Counter()
        self.answers: dict[str, tuple[int, bytes]] = {}

    async def run(self, stop: asyncio.Event) -> None:
        n = 0
        conversation = f"probe-{secrets.token_hex(3)}"
        while not stop.is_set():
            tool_call_id = f"{conversation}-{n}"
            n += 1
            body = interrupt(tool_call_id, conversation)
            while not stop.is_set():  # the same id until answered
                try:
                    status, _, data = await self.http.request(
                        "POST", "/v1/tool-calls", json.dumps(body).encode(), within=10
                    )
                except (OSError, asyncio.IncompleteReadError, TimeoutError) as exc:
                    self.statuses[type(exc).__name__] += 1
                    await asyncio.sleep(0.02)
                    continue
                self.statuses[status] += 1
                if status == 503:
                    await asyncio.sleep(0.02)
                    continue
                self.answers[tool_call_id] = (status, data)
                self.successes.append(time.monotonic())
                break
            await asyncio.sleep(self.interval)
        await self.http.close()

    def gap_between(self, start: float, end: float) -> float:
        """The longest time without an answered write in [start, end]."""
        times = [t for t in self.successes if start <= t <= end]
        if len(times) < 2:
            return float("nan")
        # Leave out the probe's own pause: what is left is time a write could not be made.
        return max(0.0, max(b - a for a, b in itertools.pairwise(times)) - self.interval)


# --- the receiving Agent ------------------------------------------------------------------------


class Receiver(asyncio.Protocol):
    """Raw HTTP/1.1 keep-alive server: 204 for a delivery, or 503 for a share ``fail_share`` of them."""

    def __init__(self, state: ReceiverState) -> None:
        self.state = state
        self.buffer = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while (end := self.buffer.find(b"\r\n\r\n")) >= 0:
            head = self.buffer[:end].decode("latin-1")
            headers = {}
            for line in head.split("\r\n")[1:]:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            length = int(headers.get("content-length", "0"))
            if len(self.buffer) < end + 4 + length:
                return
            body = self.buffer[end + 4 : end + 4 + length]
            self.buffer = self.buffer[end + 4 + length :]
            assert self.transport is not None
            self.transport.write(self.state.answer(headers.get("webhook-id", ""), body))


@dataclass
class ReceiverState:
    fail_share: float = 0.0
    requests: int = 0
    failed: int = 0
    deliveries: Counter[str] = field(default_factory=Counter)  # webhook-id -> 2xx answers given
    payloads: dict[str, dict[str, Any]] = field(default_factory=dict)
    rng: random.Random = field(default_factory=random.Random)

    def answer(self, webhook_id: str, body: bytes) -> bytes:
        self.requests += 1
        if self.rng.random() < self.fail_share:
            self.failed += 1
            return b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n"
        self.deliveries[webhook_id] += 1
        if webhook_id not in self.payloads:
            self.payloads[webhook_id] = json.loads(body)
        return b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n"

    @property
    def duplicates(self) -> int:
        return sum(count - 1 for count in self.deliveries.values())


async def start_receiver(state: ReceiverState) -> tuple[asyncio.Server, int]:
    port = free_port()
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: Receiver(state), "127.0.0.1", port, backlog=1024)
    return server, port


# --- processes ----------------------------------------------------------------------------------

WEBHOOK_SECRET = "whsec_" + base64.b64encode(b"failover-rig-secret-0123456789").decode()
_INHERITED = ("DATABASE_URL", "AGENT_TOKEN", "HOST_TOKEN", "OPERATOR_TOKEN", "DB_POOL_SIZE", "RELAY_ID")


def _environment(**values: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in _INHERITED and not k.startswith(("RELAY_", "SWEEPER_"))
    }
    env.update(values)
    return env


class _Child:
    """A child process the rig kills (SIGKILL, counted) or stops (SIGTERM, then SIGKILL after 30 s)."""

    log: Path
    process: subprocess.Popen[bytes] | None = None
    kills = 0

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()
        self.kills += 1

    def stop(self) -> int | None:
        if self.process is None or self.process.poll() is not None:
            return None if self.process is None else self.process.returncode
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()


class ServiceExitedError(RuntimeError):
    """The service process ended before it was ready; the message holds its last log lines."""


class ServiceProcess(_Child):
    """``python -m service serve`` on one port for its whole life, however often it is killed."""

    def __init__(self, database_url: str, log_dir: Path, *, port: int | None = None, **env: str) -> None:
        self.port = port or free_port()
        self.agent_token = "rig-agent-" + secrets.token_hex(16)
        self.host_token = "rig-host-" + secrets.token_hex(16)
        self.env = _environment(
            DATABASE_URL=database_url,
            AGENT_TOKEN=self.agent_token,
            HOST_TOKEN=self.host_token,
            OPERATOR_TOKEN="rig-operator-" + secrets.token_hex(16),
            **env,
        )
        self.log = log_dir / f"service-{self.port}.log"

    def start(self) -> None:
        with self.log.open("ab") as handle:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "service", "serve", "--host", "127.0.0.1", "--port", str(self.port)],
                cwd=ROOT,
                env=self.env,
                stdout=handle,
                stderr=subprocess.STDOUT,
            )

    async def wait_ready(self, within: float = 60.0) -> float:
        began = time.monotonic()
        http = Http(self.port, "")
        try:
            while time.monotonic() - began < within:
                assert self.process is not None
                if self.process.poll() is not None:
                    tail = "\n".join(self.log.read_text(errors="replace").splitlines()[-15:])
                    raise ServiceExitedError(f"the service exited with {self.process.returncode}:\n{tail}")
                with contextlib.suppress(OSError, asyncio.IncompleteReadError, TimeoutError):
                    if (await http.request("GET", "/readyz", within=2))[0] == 200:
                        return time.monotonic() - began
                await asyncio.sleep(0.05)
        finally:
            await http.close()
        raise TimeoutError(f"the service was not ready within {within} s; log {self.log}")

    async def start_ready(self, attempts: int = 3) -> None:
        """The first start: on a port another process took meanwhile, again on a new port."""
        for attempt in range(attempts):
            self.start()
            try:
                await self.wait_ready()
                return
            except ServiceExitedError as exc:
                if attempt == attempts - 1 or "address already in use" not in str(exc):
                    raise
                print(f"port {self.port} was taken meanwhile; starting the service on another", flush=True)
                self.port = free_port()
                self.log = self.log.with_name(f"service-{self.port}.log")


class RelayProcess(_Child):
    """``python -m relay`` with a fixed ``RELAY_ID``: a restarted relay hands back at once the leases
    its killed predecessor held, instead of leaving them to expire."""

    def __init__(self, database_url: str, webhook_url: str, log_dir: Path, relay_id: str, **env: str) -> None:
        self.env = _environment(
            DATABASE_URL=database_url,
            AGENT_WEBHOOK_URL=webhook_url,
            WEBHOOK_SECRET=WEBHOOK_SECRET,
            RELAY_ID=relay_id,
            RELAY_BACKOFF_BASE_SECONDS="0.2",
            RELAY_BACKOFF_MAX_SECONDS="2",
            **env,
        )
        self.log = log_dir / f"{relay_id}.log"

    def start(self) -> None:
        with self.log.open("ab") as handle:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "relay"],
                cwd=ROOT,
                env=self.env,
                stdout=handle,
                stderr=subprocess.STDOUT,
            )


def migrate(database_url: str, log_dir: Path) -> None:
    """``python -m service migrate`` with the URL every process gets (several hosts, for the rig)."""
    with (log_dir / "migrate.log").open("ab") as handle:
        code = subprocess.call(
            [sys.executable, "-m", "service", "migrate"],
            cwd=ROOT,
            env=_environment(DATABASE_URL=database_url),
            stdout=handle,
            stderr=subprocess.STDOUT,
        )
    if code != 0:
        raise RuntimeError(f"python -m service migrate exited {code}; log {log_dir / 'migrate.log'}")


# --- afterwards ---------------------------------------------------------------------------------


@dataclass
class Rig:
    """What a run drives and checks: the Agents' load and the probe on one service, two relays, the
    receiver standing in for the Agent's webhook. ``codes`` are the exit codes once it has stopped."""

    url: str
    log_dir: Path
    receiver: ReceiverState
    service: ServiceProcess
    relays: list[RelayProcess]
    probe: Probe
    agents: Agents
    figures: Figures = field(default_factory=Figures)
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    codes: list[int | None] = field(default_factory=list)

    async def settled_and_checked(self, within: float) -> Checks:
        """Wait for every operation to settle and every result to be delivered, then run ``check``."""
        left = await settle(self.url, within=within)
        checks = await asyncio.to_thread(check, self.url, self.figures, self.receiver, self.probe.answers)
        checks.add(
            f"everything settled and delivered within {within:.0f} s",
            left == {"focusing": 0, "undelivered": 0},
            str(left),
        )
        return checks


@contextlib.asynccontextmanager
async def running_rig(
    url: str, log_dir: Path, *, agents: int, relay_prefix: str, fail_share: float = 0.0
) -> AsyncIterator[Rig]:
    """The receiver, the service (ready) and two relays, all on ``url``; on the way out, whatever
    happened, ``stop`` is set and every process is stopped with SIGTERM (their codes in ``codes``)."""
    receiver = ReceiverState(fail_share=fail_share)
    server, receiver_port = await start_receiver(receiver)
    service = ServiceProcess(url, log_dir)
    relays = [
        RelayProcess(url, f"http://127.0.0.1:{receiver_port}/webhook", log_dir, f"{relay_prefix}-{n}")
        for n in (1, 2)
    ]
    rig: Rig | None = None
    try:
        await service.start_ready()  # its port is final only now (a taken one is replaced)
        for relay in relays:
            relay.start()
        figures = Figures()
        rig = Rig(
            url,
            log_dir,
            receiver,
            service,
            relays,
            Probe(service.port, service.agent_token),
            Agents(service.port, service.agent_token, service.host_token, figures, count=agents),
            figures,
        )
        yield rig
    finally:
        if rig is not None:
            rig.stop.set()
        codes = [p.stop() for p in (*relays, service)]
        if rig is not None:
            rig.codes = codes
        server.close()


async def settle(database_url: str, within: float = 120.0) -> dict[str, int]:
    """Wait until nothing is focusing and every outbox row is delivered (or ``within`` seconds)."""
    deadline = time.monotonic() + within
    counts: dict[str, int] = {}
    while time.monotonic() < deadline:
        with contextlib.suppress(psycopg.OperationalError):
            async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
                row = await (
                    await conn.execute(
                        "SELECT (SELECT count(*) FROM operations WHERE state = 'focusing'),"
                        " (SELECT count(*) FROM outbox WHERE status <> 'delivered')"
                    )
                ).fetchone()
                assert row is not None
                counts = {"focusing": int(row[0]), "undelivered": int(row[1])}
                if counts == {"focusing": 0, "undelivered": 0}:
                    return counts
        await asyncio.sleep(0.25)
    return counts


@dataclass
class Checks:
    results: list[tuple[str, bool, str]] = field(default_factory=list)

    def add(self, name: str, ok: bool, detail: str = "") -> None:
        self.results.append((name, ok, detail))

    @property
    def passed(self) -> bool:
        return all(ok for _, ok, _ in self.results)

    def print(self) -> None:
        for name, ok, detail in self.results:
            print(f"  [{'ok' if ok else 'FAIL'}] {name}{': ' + detail if detail else ''}")

    def verdict(self, log_dir: Path, hint: str = "") -> int:
        """Print the checks and the verdict; the exit code (1 when any failed)."""
        print("checks:")
        self.print()
        if not self.passed:
            print(f"FAILED (logs in {log_dir}{hint})")
            return 1
        print("all checks passed")
        return 0


def check(
    database_url: str, figures: Figures, receiver: ReceiverState, probe_answers: dict[str, tuple[int, bytes]]
) -> Checks:
    """Every acknowledged answer and outbox row present, every operation final once, every result
    delivered, no 500 — read from the primary the URL leads to."""
    checks = Checks()
    with psycopg.connect(database_url, autocommit=True, row_factory=dict_row) as conn:
        recorded = {
            row["tool_call_id"]: (row["status_code"], row["response"])
            for row in conn.execute(
                "SELECT tool_call_id, status_code, response::text AS response FROM tool_calls"
            )
        }
        operations = {
            str(row["operation_id"]): row
            for row in conn.execute(
                "SELECT operation_id, tool_call_id, state, reason, finalized_at FROM operations"
            )
        }
        outbox = conn.execute(
            "SELECT event_id::text AS event_id, tool_call_id, operation_id::text AS operation_id, status,"
            " payload->'result'->>'state' AS state FROM outbox"
        ).fetchall()

    acknowledged = {**figures.acknowledged, **probe_answers}
    missing = [
        i for i, (status, _) in acknowledged.items() if i not in recorded and status not in (401, 404, 422)
    ]
    different = [
        i
        for i, (status, body) in acknowledged.items()
        if i in recorded and recorded[i] != (status, body.decode())
    ]
    checks.add(
        "every acknowledged answer is recorded on the primary, byte for byte",
        not missing and not different,
        f"{len(acknowledged)} answers; missing {missing[:3]}, different {different[:3]}",
    )

    starts = {i for i, (status, _) in figures.acknowledged.items() if i.endswith("-start") and status == 202}
    by_call = {row["tool_call_id"]: row for row in operations.values()}
    unknown = [i for i in starts if i not in by_call]
    extra = [row["tool_call_id"] for row in operations.values() if row["tool_call_id"] not in starts]
    checks.add(
        "one operation per accepted start, none without one",
        not unknown and not extra,
        f"{len(starts)} starts, {len(operations)} operations; lost {unknown[:3]}, unacknowledged {extra[:3]}",
    )
    focusing = [
        i for i, row in operations.items() if row["state"] == "focusing" or row["finalized_at"] is None
    ]
    rows_per_call = Counter(row["tool_call_id"] for row in outbox)
    not_once = [row["tool_call_id"] for row in operations.values() if rows_per_call[row["tool_call_id"]] != 1]
    disagree = [
        row["event_id"]
        for row in outbox
        if row["operation_id"] in operations and row["state"] != operations[row["operation_id"]]["state"]
    ]
    told_otherwise = [
        op for op, state in figures.host_told if op in operations and operations[op]["state"] != state
    ]
    interrupted = []
    for i, (status, body) in figures.acknowledged.items():
        if i.endswith("-interrupt") and status == 200:
            answer = json.loads(body)
            if (
                answer.get("status") == "interrupted"
                and operations.get(answer["operation_id"], {}).get("state") != "interrupted"
            ):
                interrupted.append(i)
    checks.add(
        "every operation final exactly once, as its answers said",
        not focusing and not not_once and not disagree and not told_otherwise and not interrupted,
        f"still focusing {len(focusing)}, not one result {len(not_once)}, result vs state {len(disagree)},"
        f" Host told otherwise {len(told_otherwise)}, Agent told interrupted otherwise {len(interrupted)}",
    )

    received = set(receiver.deliveries)
    on_primary = {row["event_id"] for row in outbox}
    undelivered = [
        row["event_id"] for row in outbox if row["status"] != "delivered" or row["event_id"] not in received
    ]
    vanished = received - on_primary
    wrong = [e for e, payload in receiver.payloads.items() if payload.get("event_id") != e]
    checks.add(
        "every result delivered, every delivered row present on the primary",
        not undelivered and not vanished and not wrong,
        f"{len(outbox)} rows; undelivered {len(undelivered)}, delivered but gone {len(vanished)},"
        f" body of another row {len(wrong)}",
    )
    errors = [e for e in figures.errors]
    checks.add(
        "no 500, every call answered",
        not errors and not any(status >= 500 for status in figures.statuses),
        f"{sum(figures.statuses.values())} answers; {errors[:3]}",
    )
    return checks


def print_figures(figures: Figures, receiver: ReceiverState, extra: Callable[[], None] | None = None) -> None:
    sends = dict(figures.unanswered_sends)
    statuses = dict(sorted(figures.statuses.items()))
    delivered = sum(receiver.deliveries.values())
    print(f"  calls answered            {figures.calls:>7}  (by status: {statuses})")
    print(f"  starts accepted           {figures.starts:>7}  (endings: {dict(figures.endings)})")
    print(f"  calls that needed a retry {figures.retried_calls:>7}  (unanswered sends: {sends})")
    print(f"  deliveries                {delivered:>7}  of {len(receiver.deliveries)} results")
    print(
        f"  duplicates the Agent saw  {receiver.duplicates:>7}"
        f"  (it answered {receiver.failed} deliveries with 503 on purpose)"
    )
    if extra is not None:
        extra()

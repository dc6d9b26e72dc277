"""The load of the rigs: Agents that start Pomodoros and end them every way there is, and a probe
that times the outage.

* ``Agents``: several Agents, each opening Pomodoros in conversations of its own and ending them
  every way there is — the Agent's interrupt, the person leaving, the app closed, the deadline (and
  a late interrupt after it). Every call that gets no answer (a 503, a refused or cut connection) is
  sent again, the same body under the same ``tool_call_id``, until it is answered.
* ``Probe``: one write per 50 ms (an interrupt in an empty conversation, a recorded answer), so the
  seconds without a working write are measured to a tenth of a second.
* ``Figures``: what the Agents were answered, for the checks (``rigs.checks``).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import random
import secrets
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from harness.calls import interrupt_body, start_body
from harness.http_client import HttpClient

ENDINGS = ("interrupt", "leave", "close", "deadline")
GIVE_UP_AFTER = 90.0  # a call unanswered this long is a failure of the run


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

    def __init__(self, base_url: str, token: str, figures: Figures, *, max_pause: float = 1.0) -> None:
        self.http = HttpClient(base_url, token)
        self.figures = figures
        self.max_pause = max_pause

    async def __call__(self, method: str, path: str, payload: dict[str, Any]) -> tuple[int, bytes]:
        body = json.dumps(payload, separators=(",", ":")).encode()
        give_up = time.monotonic() + GIVE_UP_AFTER
        retried = False
        while True:
            pause = 0.05
            try:
                status, headers, data = await self.http.request(method, path, body, within=30.0)
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


class Agents:
    """``count`` Agents (and the Host acting for their people) until ``stop`` is set."""

    def __init__(
        self,
        base_url: str,
        agent_token: str,
        host_token: str,
        figures: Figures,
        *,
        count: int,
        endings: tuple[str, ...] = ENDINGS,
    ) -> None:
        self.base_url = base_url
        self.endings = endings
        self.agent_token = agent_token
        self.host_token = host_token
        self.figures = figures
        self.count = count
        self.run_id = secrets.token_hex(3)

    async def run(self, stop: asyncio.Event) -> None:
        await asyncio.gather(*(self._agent(n, stop) for n in range(self.count)))

    async def _agent(self, n: int, stop: asyncio.Event) -> None:
        agent = Caller(self.base_url, self.agent_token, self.figures)
        host = Caller(self.base_url, self.host_token, self.figures)
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
            start_body(conversation, duration, "failover load", tool_call_id=start_id),
        )
        figures.acknowledged[start_id] = (status, body)
        if status != 202:
            figures.errors.append(f"start {start_id}: HTTP {status} {body[:200]!r}")
            return
        started = json.loads(body)
        ending = rng.choice(self.endings)
        await asyncio.sleep(rng.uniform(0.0, duration * 0.7) if ending != "deadline" else duration + 0.2)
        if ending in ("interrupt", "deadline"):
            # After the deadline the interrupt answers operation_already_final (the late window).
            interrupt_id = f"{conversation}-interrupt"
            status, body = await agent(
                "POST", "/v1/tool-calls", interrupt_body(conversation, tool_call_id=interrupt_id)
            )
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

    def __init__(self, base_url: str, agent_token: str, interval: float = 0.05) -> None:
        self.http = HttpClient(base_url, agent_token)
        self.interval = interval
        self.successes: list[float] = []
        self.statuses: Counter[int | str] = Counter()
        self.answers: dict[str, tuple[int, bytes]] = {}
        self.resent: set[str] = set()  # writes sent again under the same id before they were answered

    async def run(self, stop: asyncio.Event) -> None:
        n = 0
        conversation = f"probe-{secrets.token_hex(3)}"
        while not stop.is_set():
            tool_call_id = f"{conversation}-{n}"
            n += 1
            body = interrupt_body(conversation, tool_call_id=tool_call_id)
            sends = 0
            while not stop.is_set():  # the same id until answered
                sends += 1
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
                if sends > 1:
                    self.resent.add(tool_call_id)
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

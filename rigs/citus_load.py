"""The Citus rig's load beside the shared Agents (``rigs.load``), spread over two service replicas:
every call of one cycle goes to a replica picked at random, so a conversation is worked on from both.

* ``Racers``: a Pomodoro started, its instance dimmed (a surface event), then the Agent's interrupt
  and the person leaving the workspace sent at the same moment (through different replicas); the
  workspace read afterwards; the conversation's event stream read from its first event.
* ``Askers``: ``interact.ask`` through the Agent API, answered by the person through the Host API.
* ``McpAgents``: ``pomodoro.start`` (and half the time ``pomodoro.interrupt``) over MCP.

What each was answered goes into the shared ``Figures`` (REST tool calls, for the byte-for-byte
checks) and ``Extra`` (the rest, for the rig's own checks).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
import mcp_types as types
from mcp.shared.exceptions import MCPError

from harness.calls import interrupt_body, start_body
from harness.mcp import McpSession, mcp_session
from harness.processes import ServiceProcess
from rigs.load import GIVE_UP_AFTER, Caller, Figures


@dataclass
class Extra:
    #: tool_call_ids of the starts accepted over MCP (their operations are the MCP face's).
    mcp_starts: set[str] = field(default_factory=set)
    mcp_calls: int = 0
    races: int = 0
    asked: int = 0
    answered: int = 0
    surface_events: int = 0
    workspace_reads: int = 0
    #: conversation -> the event ids its stream delivered, in order.
    streams: dict[str, list[int]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)


def _pick(services: Sequence[ServiceProcess], rng: random.Random) -> ServiceProcess:
    return rng.choice(list(services))


class _Crew:
    """``count`` members working at once, each with a ``Caller`` per replica for the Agent and one
    for the Host; what a member cannot get answered goes into ``Extra.errors``."""

    #: Names the members' random sequences (and the conversations they make).
    kind = ""

    def __init__(
        self, services: Sequence[ServiceProcess], figures: Figures, extra: Extra, *, count: int
    ) -> None:
        self.services = services
        self.figures = figures
        self.extra = extra
        self.count = count
        self.run_id = secrets.token_hex(3)

    async def run(self, stop: asyncio.Event) -> None:
        await asyncio.gather(*(self._member(n, stop) for n in range(self.count)))

    async def _member(self, n: int, stop: asyncio.Event) -> None:
        name = f"{self.kind}-{self.run_id}-{n}"
        rng = random.Random(name)
        agents = [Caller(s.base_url, s.agent_token, self.figures) for s in self.services]
        hosts = [Caller(s.base_url, s.host_token, self.figures) for s in self.services]
        try:
            await self._work(name, rng, agents, hosts, stop)
        except RuntimeError as exc:
            self.extra.errors.append(str(exc))
        finally:
            for caller in (*agents, *hosts):
                await caller.http.close()

    async def _work(
        self, name: str, rng: random.Random, agents: list[Caller], hosts: list[Caller], stop: asyncio.Event
    ) -> None:
        raise NotImplementedError


class Racers(_Crew):
    kind = "race"

    async def _work(
        self, name: str, rng: random.Random, agents: list[Caller], hosts: list[Caller], stop: asyncio.Event
    ) -> None:
        cycle = 0
        while not stop.is_set():
            await self._cycle(agents, hosts, rng, f"{name}-{cycle}")
            cycle += 1

    async def _cycle(self, agents: list[Caller], hosts: list[Caller], rng: random.Random, cid: str) -> None:
        figures, extra = self.figures, self.extra
        streamer = asyncio.create_task(self._stream(rng.choice(list(self.services)), cid))
        try:
            start_id = f"{cid}-start"
            status, body = await rng.choice(agents)(
                "POST", "/v1/tool-calls", start_body(cid, 3, "race", tool_call_id=start_id)
            )
            figures.acknowledged[start_id] = (status, body)
            if status != 202:
                extra.errors.append(f"start {start_id}: HTTP {status} {body[:200]!r}")
                return
            instance = json.loads(body)["instance_id"]
            status, body = await rng.choice(hosts)(
                "POST", f"/v1/host/instances/{instance}/surface-events", {"event": "dimmed"}
            )
            extra.surface_events += status == 200
            if status != 200:
                extra.errors.append(f"surface event in {cid}: HTTP {status} {body[:200]!r}")
            await asyncio.sleep(rng.uniform(0.0, 0.5))
            a, b = rng.sample(range(len(agents)), 2) if len(agents) > 1 else (0, 0)
            interrupt_id = f"{cid}-interrupt"
            (i_status, i_body), (l_status, l_body) = await asyncio.gather(
                agents[a]("POST", "/v1/tool-calls", interrupt_body(cid, tool_call_id=interrupt_id)),
                hosts[b](
                    "POST", f"/v1/host/conversations/{cid}/workspace/foreground", {"target": "interact"}
                ),
            )
            figures.acknowledged[interrupt_id] = (i_status, i_body)
            if i_status != 200 or l_status != 200:
                extra.errors.append(f"race in {cid}: interrupt {i_status}, leave {l_status} {l_body[:200]!r}")
            status, body = await rng.choice(hosts)("GET", f"/v1/host/conversations/{cid}/workspace", {})
            extra.workspace_reads += status == 200
            workspace = json.loads(body) if status == 200 else {}
            if workspace.get("foreground") != "interact" or workspace.get("focusing_operation") is not None:
                extra.errors.append(f"workspace of {cid} after the race: {status} {body[:300]!r}")
            extra.races += 1
            await asyncio.sleep(0.3)  # the stream's last events
        finally:
            streamer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await streamer

    async def _stream(self, service: ServiceProcess, cid: str) -> None:
        """The conversation's event stream from its first event; the ids it carried, in order."""
        ids = self.extra.streams.setdefault(cid, [])
        headers = {"Authorization": f"Bearer {service.host_token}", "Accept": "text/event-stream"}
        url = f"{service.base_url}/v1/host/conversations/{cid}/events?after=0"
        with contextlib.suppress(httpx.HTTPError):
            async with (
                httpx.AsyncClient(timeout=httpx.Timeout(30.0, read=None)) as client,
                client.stream("GET", url, headers=headers) as response,
            ):
                async for line in response.aiter_lines():
                    if line.startswith("id:"):
                        ids.append(int(line[3:].strip()))


class Askers(_Crew):
    """``interact.ask`` answered by the person; half the answers name the conversation
    (``?conversation_id=``), as a Host must once a ``tool_call_id`` is asked in several."""

    kind = "ask"

    async def _work(
        self, name: str, rng: random.Random, agents: list[Caller], hosts: list[Caller], stop: asyncio.Event
    ) -> None:
        cycle = 0
        while not stop.is_set():
            cid = f"{name}-{cycle}"
            ask_id = f"{cid}-ask"
            body = {
                "tool_call_id": ask_id,
                "conversation_id": cid,
                "tool": "interact.ask",
                "arguments": {"prompt": "Another round?", "choices": ["yes", "no"]},
            }
            status, answer = await rng.choice(agents)("POST", "/v1/tool-calls", body)
            self.figures.acknowledged[ask_id] = (status, answer)
            if status != 202:
                self.extra.errors.append(f"ask {ask_id}: HTTP {status} {answer[:200]!r}")
                return
            self.extra.asked += 1
            await asyncio.sleep(rng.uniform(0.0, 0.3))
            path = f"/v1/host/interactions/{ask_id}/answer"
            if rng.random() < 0.5:
                path += f"?conversation_id={cid}"
            status, receipt = await rng.choice(hosts)("POST", path, {"answer": rng.choice(["yes", "no"])})
            if status != 200:
                self.extra.errors.append(f"answer {ask_id}: HTTP {status} {receipt[:200]!r}")
                return
            self.extra.answered += 1
            cycle += 1


class McpAgents:
    def __init__(self, services: Sequence[ServiceProcess], extra: Extra, *, count: int) -> None:
        self.services = services
        self.extra = extra
        self.count = count
        self.run_id = secrets.token_hex(3)

    async def run(self, stop: asyncio.Event) -> None:
        await asyncio.gather(*(self._agent(n, stop) for n in range(self.count)))

    async def _agent(self, n: int, stop: asyncio.Event) -> None:
        service = self.services[n % len(self.services)]
        rng = random.Random(f"mcp-{self.run_id}-{n}")
        cycle = 0
        try:
            async with mcp_session(service.base_url, service.agent_token) as mcp:
                while not stop.is_set():
                    cid = f"mcp-{self.run_id}-{n}-{cycle}"
                    start_id = f"{cid}-mcpstart"
                    started = await _until_answered(
                        mcp,
                        "pomodoro.start",
                        {"duration_seconds": 1, "activity": "mcp load"},
                        conversation_id=cid,
                        tool_call_id=start_id,
                    )
                    self.extra.mcp_calls += 1
                    if started.is_error:
                        self.extra.errors.append(f"mcp start {start_id}: {started.content!r}"[:300])
                        return
                    self.extra.mcp_starts.add(start_id)
                    if rng.random() < 0.5:
                        await asyncio.sleep(rng.uniform(0.0, 0.5))
                        await _until_answered(
                            mcp,
                            "pomodoro.interrupt",
                            {},
                            conversation_id=cid,
                            tool_call_id=f"{cid}-mcpinterrupt",
                        )
                        self.extra.mcp_calls += 1
                    else:
                        await asyncio.sleep(1.2)  # its deadline falls due
                    cycle += 1
        except Exception as exc:
            self.extra.errors.append(f"mcp agent {n}: {exc!r}"[:300])


async def _until_answered(
    mcp: McpSession, tool: str, arguments: dict[str, Any], **meta: str
) -> types.CallToolResult:
    """The call, sent again under the same tool_call_id while the service answers that the database
    is unavailable (a worker restarting), as an Agent retries."""
    for _ in range(int(GIVE_UP_AFTER / 0.2)):
        try:
            return await mcp.call(tool, arguments, **meta)
        except MCPError as error:
            if "database is unavailable" not in str(error):
                raise
        await asyncio.sleep(0.2)
    raise RuntimeError(f"{tool} {meta} unanswered for {GIVE_UP_AFTER:.0f} s")

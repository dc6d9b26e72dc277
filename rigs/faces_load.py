"""The load of the other faces, beside the Agents' REST calls (``rigs.load``): what a deployment
also carries through its pooler.

* questions: ``interact.ask`` over REST, answered by the Host (``POST …/interactions/{id}/answer``);
  the answer is a result the relays deliver, as a Pomodoro's is;
* MCP: ``pomodoro.start`` then ``pomodoro.interrupt`` as ``tools/call`` at 2026-07-28 (no session:
  any replica answers), each answer checked to be the REST body it stands for;
* an event stream: the Host's ``GET …/events`` on one conversation that the questions change, read
  throughout (and opened again when a replica goes away under it).

Every REST call goes through ``rigs.load.Caller`` (sent again until answered), so its answers count
in the same figures as the Agents' and are checked the same way (recorded, no 5xx).
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from rigs.load import GIVE_UP_AFTER, Caller, Figures

MODERN = "2026-07-28"


@dataclass
class FacesFigures:
    asked: int = 0
    answered: int = 0
    mcp_calls: int = 0
    mcp_failures: list[str] = field(default_factory=list)
    events: int = 0
    stream_opens: int = 0
    stream_errors: list[str] = field(default_factory=list)


class OtherFaces:
    """Questions, MCP calls and one event stream until ``stop``."""

    def __init__(self, base_url: str, agent_token: str, host_token: str, figures: Figures) -> None:
        self.base_url = base_url
        self.agent_token = agent_token
        self.host_token = host_token
        self.figures = figures
        self.faces = FacesFigures()
        self.run_id = secrets.token_hex(3)
        self.asked_in = f"faces-{self.run_id}-questions"

    async def run(self, stop: asyncio.Event) -> None:
        await asyncio.gather(self._questions(stop), self._mcp(stop), self._stream(stop))

    async def _questions(self, stop: asyncio.Event) -> None:
        agent = Caller(self.base_url, self.agent_token, self.figures)
        host = Caller(self.base_url, self.host_token, self.figures)
        n = 0
        try:
            while not stop.is_set():
                ask_id = f"{self.asked_in}-ask-{n}"
                ask = {
                    "tool_call_id": ask_id,
                    "conversation_id": self.asked_in,
                    "tool": "interact.ask",
                    "arguments": {"prompt": "Another round?", "choices": ["yes", "no"]},
                }
                status, body = await agent("POST", "/v1/tool-calls", ask)
                self.figures.acknowledged[ask_id] = (status, body)
                if status == 202:
                    self.faces.asked += 1
                    status, _ = await host(
                        "POST", f"/v1/host/interactions/{ask_id}/answer", {"answer": "yes"}
                    )
                    self.faces.answered += status == 200
                n += 1
                await asyncio.sleep(0.2)
        except RuntimeError as exc:
            self.figures.errors.append(str(exc))
        finally:
            await agent.http.close()
            await host.http.close()

    async def _mcp(self, stop: asyncio.Event) -> None:
        conversation = f"faces-{self.run_id}-mcp"
        n = 0
        async with httpx.AsyncClient(base_url=self.base_url, timeout=30) as http:
            while not stop.is_set():
                for tool, arguments, ending in (
                    ("pomodoro.start", {"duration_seconds": 60, "activity": "over MCP"}, "start"),
                    ("pomodoro.interrupt", {}, "interrupt"),
                ):
                    call_id = f"mcp-{self.run_id}-{n}-{ending}"
                    answer = await self._tools_call(http, conversation, call_id, tool, arguments)
                    if answer is None:
                        return
                    # The answer is the REST body it stands for: checked against the recorded one,
                    # byte for byte, with the Agents' answers (rigs.checks); the database writes it
                    # with json's default separators.
                    status = int(answer["_meta"]["io.lineup/http_status"])
                    body = json.dumps(answer["structuredContent"], ensure_ascii=False)
                    self.figures.acknowledged[call_id] = (status, body.encode())
                n += 1
                await asyncio.sleep(0.2)

    async def _tools_call(
        self, http: httpx.AsyncClient, conversation: str, call_id: str, tool: str, arguments: dict[str, Any]
    ) -> dict[str, Any] | None:
        """One ``tools/call``, sent again (the same id) until a replica answers it; None on a failure."""
        meta = {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientInfo": {"name": "pooler-rig", "version": "0"},
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.lineup/conversation_id": conversation,
            "io.lineup/tool_call_id": call_id,
        }
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": tool, "arguments": arguments, "_meta": meta},
        }
        headers = {
            "Authorization": f"Bearer {self.agent_token}",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": MODERN,
            "Mcp-Method": "tools/call",
            "Mcp-Name": tool,
        }
        give_up = time.monotonic() + GIVE_UP_AFTER
        while True:
            try:
                answer = await http.post("/mcp", json=body, headers=headers)
            except httpx.TransportError:
                answer = None
            if answer is not None and answer.status_code != 503:
                break
            if time.monotonic() > give_up:
                self.faces.mcp_failures.append(f"{tool} {call_id}: unanswered for {GIVE_UP_AFTER:.0f} s")
                return None
            await asyncio.sleep(0.1)
        self.faces.mcp_calls += 1
        result = answer.json().get("result") if answer.status_code == 200 else None
        if result is None or result.get("isError"):
            self.faces.mcp_failures.append(f"{tool} {call_id}: HTTP {answer.status_code} {answer.text[:300]}")
            return None
        return dict(result)

    async def _stream(self, stop: asyncio.Event) -> None:
        """The Host's event stream of the questions' conversation, opened again when it ends."""
        path = f"/v1/host/conversations/{self.asked_in}/events"
        headers = {"Authorization": f"Bearer {self.host_token}", "Accept": "text/event-stream"}
        async with httpx.AsyncClient(base_url=self.base_url, timeout=httpx.Timeout(30, read=60)) as http:
            while not stop.is_set():
                try:
                    async with http.stream("GET", path, headers=headers) as answer:
                        if answer.status_code != 200:
                            self.faces.stream_errors.append(f"HTTP {answer.status_code}")
                            await asyncio.sleep(0.5)
                            continue
                        self.faces.stream_opens += 1
                        reading = asyncio.ensure_future(self._read(answer))
                        stopping = asyncio.ensure_future(stop.wait())
                        await asyncio.wait({reading, stopping}, return_when=asyncio.FIRST_COMPLETED)
                        reading.cancel()
                        stopping.cancel()
                except httpx.TransportError:
                    await asyncio.sleep(0.2)  # the replica went away: a browser opens it again

    async def _read(self, answer: httpx.Response) -> None:
        async for line in answer.aiter_lines():
            if line.startswith("data:"):
                json.loads(line.removeprefix("data:"))  # every event is JSON
                self.faces.events += 1

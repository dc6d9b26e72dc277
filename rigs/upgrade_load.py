"""The Agent's load in ``rigs.upgrade``: per conversation, starts, interrupts and questions the
person answers, each sent to a release taking traffic and some replayed through the other; every
call is kept for the checks."""

from __future__ import annotations

import asyncio
import json
import random
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx

from rigs.upgrade_stack import Stack


@dataclass
class Call:
    body: dict[str, Any]
    release: str  # the one that answered first
    status: int
    answer: bytes


@dataclass
class Load:
    stack: Stack
    targets: dict[str, str]  # release name -> base URL, those taking new requests
    calls: list[Call] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    replays: Counter[str] = field(default_factory=Counter)
    by_release: Counter[str] = field(default_factory=Counter)
    interrupted: dict[str, str] = field(default_factory=dict)  # operation_id -> receipt status
    answered: set[str] = field(default_factory=set)  # interact.ask tool_call_ids answered
    ops_reads: int = 0  # releases whose operators' reads of recorded calls were checked
    running: bool = True

    def pick(self) -> tuple[str, str]:
        name = random.choice(sorted(self.targets))
        return name, self.targets[name]

    async def post(
        self, http: httpx.AsyncClient, name: str, url: str, path: str, body: dict[str, Any], token: str
    ) -> tuple[int, bytes]:
        self.by_release[name] += 1
        try:
            answer = await http.post(f"{url}{path}", json=body, headers={"Authorization": f"Bearer {token}"})
        except httpx.HTTPError as exc:
            self.failures.append(f"{name} {path}: {exc!r}")
            return 0, b""
        if answer.status_code >= 500:
            self.failures.append(f"{name} {path}: {answer.status_code} {answer.text[:200]}")
        return answer.status_code, answer.content

    async def read_ops(self, http: httpx.AsyncClient) -> None:
        """The operators' reads of recorded calls through every release taking traffic — the list of
        the last hour and one call's trace — answer 200, and each release shows each call with the
        same status (the previous release reads it as ``tool_calls.status_code``, this one from the
        outcome word)."""
        headers = {"Authorization": f"Bearer {self.stack.operator_token}"}
        statuses: dict[str, dict[str, int]] = {}
        for name, url in sorted(self.targets.items()):
            listed = await http.get(f"{url}/v1/ops/tool-calls", params={"limit": 200}, headers=headers)
            if listed.status_code != 200:
                self.failures.append(
                    f"{name} ops list of tool calls: {listed.status_code} {listed.text[:200]}"
                )
                continue
            rows = listed.json()["tool_calls"]
            statuses[name] = {f"{r['conversation_id']}/{r['tool_call_id']}": r["status_code"] for r in rows}
            if rows:
                row = rows[-1]
                traced = await http.get(
                    f"{url}/v1/ops/tool-calls/{row['tool_call_id']}",
                    params={"conversation_id": row["conversation_id"]},
                    headers=headers,
                )
                if (
                    traced.status_code != 200
                    or traced.json()["tool_call"]["status_code"] != row["status_code"]
                ):
                    self.failures.append(f"{name} ops trace of {row['tool_call_id']}: {traced.text[:200]}")
        if len(statuses) == 2:
            first, second = statuses.values()
            differ = [key for key in first.keys() & second.keys() if first[key] != second[key]]
            self.failures.extend(
                f"ops reads of {key}: the releases show other statuses" for key in differ[:5]
            )
        self.ops_reads += len(statuses)

    async def tool(self, http: httpx.AsyncClient, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        name, url = self.pick()
        status, answer = await self.post(http, name, url, "/v1/tool-calls", body, self.stack.agent_token)
        if not status:
            return 0, {}
        self.calls.append(Call(body, name, status, answer))
        others = [other for other in self.targets if other != name]
        if others and random.random() < 0.3:
            await self.replay(http, self.calls[-1], others[0])
        return status, json.loads(answer)

    async def replay(self, http: httpx.AsyncClient, call: Call, name: str) -> None:
        url = self.targets.get(name)
        if url is None:
            return
        status, answer = await self.post(http, name, url, "/v1/tool-calls", call.body, self.stack.agent_token)
        if not status:
            return
        self.replays[f"{call.release}->{name}"] += 1
        if (status, answer) != (call.status, call.answer):
            self.failures.append(
                f"replay of {call.body['tool_call_id']} through {name} answered {status} "
                f"{answer[:90]!r}…; {call.release} first answered {call.status} {call.answer[:90]!r}…"
            )

    async def conversation(self, http: httpx.AsyncClient, conversation_id: str) -> None:
        def body(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
            return {
                "tool_call_id": f"{tool}-{uuid.uuid4().hex}",
                "conversation_id": conversation_id,
                "tool": tool,
                "arguments": arguments,
            }

        while self.running:
            roll = random.random()
            if roll < 0.2:
                status, asked = await self.tool(http, body("interact.ask", {"prompt": "go on?"}))
                if status == 202:
                    await asyncio.sleep(random.uniform(0, 0.5))
                    tool_call_id = asked["tool_call_id"]
                    name, url = self.pick()
                    path = f"/v1/host/interactions/{tool_call_id}/answer"
                    answered, _ = await self.post(
                        http, name, url, path, {"answer": "yes"}, self.stack.host_token
                    )
                    if answered == 200:
                        self.answered.add(tool_call_id)
                    elif answered:
                        self.failures.append(f"answer of {tool_call_id} through {name}: {answered}")
                continue
            seconds = random.randint(1, 4)
            status, started = await self.tool(http, body("pomodoro.start", {"duration_seconds": seconds}))
            if status != 202 and status != 409:
                if status:
                    self.failures.append(f"start in {conversation_id}: {status} {started}")
                continue
            if status == 202 and roll < 0.6:
                await asyncio.sleep(random.uniform(0, seconds * 0.8))
                status, receipt = await self.tool(http, body("pomodoro.interrupt", {}))
                if status == 200 and receipt.get("operation_id"):
                    self.interrupted[receipt["operation_id"]] = receipt["status"]
            else:
                await asyncio.sleep(seconds + random.uniform(0, 0.5))

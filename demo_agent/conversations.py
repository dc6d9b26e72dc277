"""The demo Agent in its conversations: it follows each one's event stream (as the Host API sees
it, with ``HOST_TOKEN``), answers the person's messages through the Tool API (``AGENT_TOKEN``), and
turns each Tool result the relay delivers into a reply.

Each message's tool call uses ``demo-<message_id>`` as its ``tool_call_id``, so a repeated event
(a reconnect, a restart) replays the first answer instead of acting twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx
import structlog
from httpx_sse import EventSource

from demo_agent import chat
from demo_agent.app import log_result
from demo_agent.webhooks import SeenEvents, ToolResult

log = structlog.get_logger("demo_agent.conversations")
RECONNECT_SECONDS = 1.0
MAX_RECONNECT_SECONDS = 5.0
#: A stream down for longer than this is worth one warning; shorter outages (a restart) pass quietly.
OUTAGE_WARNING_SECONDS = 15.0
SAY_ATTEMPTS = 3


@dataclass(frozen=True)
class SseEvent:
    id: str | None
    kind: str
    data: str


async def sse_events(response: httpx.Response) -> AsyncIterator[SseEvent]:
    """Server-Sent Events of one response (httpx-sse reads the text/event-stream format); comments
    and keep-alives, which carry no data, are left out."""
    async for event in EventSource(response).aiter_sse():
        if event.data:
            yield SseEvent(event.id or None, event.event, event.data)


class Lineup:
    """The service, as the demo Agent (Tool API) and as a host for its demo conversations."""

    def __init__(self, http: httpx.AsyncClient, agent_token: str, host_token: str) -> None:
        self.http = http
        self._agent = {"Authorization": f"Bearer {agent_token}"}
        self._host = {"Authorization": f"Bearer {host_token}"}

    async def call_tool(
        self, tool_call_id: str, conversation_id: str, tool: str, arguments: dict[str, Any]
    ) -> tuple[int, dict[str, Any]]:
        body = {
            "tool_call_id": tool_call_id,
            "conversation_id": conversation_id,
            "tool": tool,
            "arguments": arguments,
        }
        response = await self.http.post("/v1/tool-calls", json=body, headers=self._agent)
        return response.status_code, response.json()

    async def ready(self) -> bool:
        """Whether the service answers ``/readyz`` (database reachable, migrations at head)."""
        try:
            response = await self.http.get("/readyz", timeout=2.0)
        except httpx.HTTPError:
            return False
        return response.status_code == 200

    async def operation(self, operation_id: str) -> dict[str, Any] | None:
        """The operation as the Agent reads it (the pull side of results); None if unreadable."""
        try:
            response = await self.http.get(
                f"/v1/operations/{quote(operation_id, safe='')}", headers=self._agent
            )
        except httpx.HTTPError:
            return None
        found: dict[str, Any] | None = response.json() if response.status_code == 200 else None
        return found

    async def workspace(self, conversation_id: str) -> dict[str, Any]:
        response = await self.http.get(f"{_conversation(conversation_id)}/workspace", headers=self._host)
        response.raise_for_status()
        found: dict[str, Any] = response.json()
        return found

    async def say(self, conversation_id: str, text: str) -> None:
        response = await self.http.post(
            f"{_conversation(conversation_id)}/messages",
            json={"role": "agent", "text": text},
            headers=self._host,
        )
        response.raise_for_status()

    def stream(
        self, conversation_id: str, last_event_id: str | None
    ) -> AbstractAsyncContextManager[httpx.Response]:
        headers = dict(self._host)
        if last_event_id is not None:
            headers["Last-Event-ID"] = last_event_id
        timeout = httpx.Timeout(10.0, read=60.0)  # keep-alives arrive every 15 s
        return self.http.stream(
            "GET", f"{_conversation(conversation_id)}/events", headers=headers, timeout=timeout
        )


def _conversation(conversation_id: str) -> str:
    return f"/v1/host/conversations/{quote(conversation_id, safe='')}"


class DemoAgent:
    def __init__(self, lineup: Lineup) -> None:
        self.lineup = lineup
        self._answered = SeenEvents()

    async def answer(self, conversation_id: str, message: dict[str, Any]) -> str:
        """The reply to one message from the person, after any Tool call it asks for."""
        intent = chat.understand(message["text"])
        call_id = f"demo-{message['message_id']}"
        if isinstance(intent, chat.StartFocus):
            arguments: dict[str, Any] = {"duration_seconds": intent.duration_seconds}
            if intent.activity:
                arguments["activity"] = intent.activity
            status, body = await self.lineup.call_tool(call_id, conversation_id, "pomodoro.start", arguments)
            if status == 202:
                return chat.started(intent.duration_seconds, intent.activity)
            if body.get("error") == "operation_already_focusing":
                return chat.already_focusing()
            return chat.failed(body)
        if isinstance(intent, chat.StopFocus):
            status, body = await self.lineup.call_tool(call_id, conversation_id, "pomodoro.interrupt", {})
            if status != 200:
                return chat.failed(body)
            stopped = None
            if body.get("status") == "interrupted":
                # How long the person focused: read back at once rather than wait for the relay.
                stopped = await self.lineup.operation(str(body.get("operation_id")))
            return chat.interrupt_receipt(body, stopped)
        if isinstance(intent, chat.AskRemaining):
            return chat.remaining(await self.lineup.workspace(conversation_id))
        return intent.reason or chat.HELP

    async def on_message(self, conversation_id: str, message: dict[str, Any]) -> None:
        """The person's messages in the main conversation get an answer, each once."""
        if message.get("role") != "user" or message.get("sub_session_id") is not None:
            return
        if not self._answered.first_time(str(message["message_id"])):
            return
        reply = await self.answer(conversation_id, message)
        log.info("reply", conversation_id=conversation_id, text=reply)
        await self.lineup.say(conversation_id, reply)

    async def on_result(self, result: ToolResult) -> None:
        """A verified, first-seen Tool result from the relay, told to the person."""
        await log_result(result)
        reply = chat.result(result.tool, result.result)
        if reply is None:
            return
        for attempt in range(1, SAY_ATTEMPTS + 1):
            try:
                await self.lineup.say(result.conversation_id, reply)
                return
            except httpx.HTTPError as exc:
                log.warning("reply_failed", conversation_id=result.conversation_id, error=str(exc))
                await asyncio.sleep(0.5 * attempt)

    async def follow(self, conversation_id: str, stop: asyncio.Event) -> None:
        """Follow one conversation until ``stop``; reconnects resume after the last event. A lost
        stream is retried quietly, with a growing pause; one that stays lost is warned about once."""
        last: str | None = None
        down_since: float | None = None
        failures = 0
        warned = False
        while not stop.is_set():
            try:
                async with self.lineup.stream(conversation_id, last) as response:
                    response.raise_for_status()
                    down_since, failures, warned = None, 0, False
                    log.info("following", conversation_id=conversation_id)
                    async for event in sse_events(response):
                        last = event.id or last
                        if event.kind == "message":
                            await self._answer_safely(conversation_id, event.data)
            except httpx.HTTPError as exc:
                now = asyncio.get_running_loop().time()
                down_since = now if down_since is None else down_since
                failures += 1
                if not warned and now - down_since >= OUTAGE_WARNING_SECONDS:
                    warned = True
                    log.warning(
                        "stream_unavailable",
                        conversation_id=conversation_id,
                        seconds=round(now - down_since),
                        error=str(exc),
                    )
                else:
                    log.debug("stream_retry", conversation_id=conversation_id, error=str(exc))
            await _pause(stop, min(RECONNECT_SECONDS * 2 ** max(0, failures - 1), MAX_RECONNECT_SECONDS))

    async def _answer_safely(self, conversation_id: str, data: str) -> None:
        try:
            await self.on_message(conversation_id, json.loads(data))
        except (httpx.HTTPError, ValueError, KeyError) as exc:
            log.warning("answer_failed", conversation_id=conversation_id, error=str(exc))

    async def wait_ready(self, stop: asyncio.Event) -> bool:
        """Until the service is ready, asking quietly every so often; False if ``stop`` comes first."""
        pause = 0.1
        while not stop.is_set():
            if await self.lineup.ready():
                return True
            await _pause(stop, pause)
            pause = min(pause * 2, MAX_RECONNECT_SECONDS)
        return False

    async def run(self, conversation_ids: Sequence[str], stop: asyncio.Event) -> None:
        """Follow the conversations, from the moment the service answers ``/readyz``, until ``stop``."""
        if not await self.wait_ready(stop):
            return
        followers = [asyncio.create_task(self.follow(cid, stop)) for cid in conversation_ids]
        await stop.wait()
        for follower in followers:
            follower.cancel()
        await asyncio.gather(*followers, return_exceptions=True)


async def _pause(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)

"""The demo Agent's tool calls over MCP (``DEMO_AGENT_PROTOCOL=mcp``) instead of REST.

An ``mcp`` SDK client session at ``LINEUP_URL``/mcp with ``AGENT_TOKEN``; each call names its
conversation and its ``tool_call_id`` in ``_meta``, so it shares its idempotency record with
``POST /v1/tool-calls`` and a repeated message still replays its first answer. The session is owned
by one task (the SDK's client must be entered and left by the same task) that serves the calls
side by side and opens a new session when the old one is lost (a service restart).
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx
import mcp_types as types
import structlog
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, METHOD_NOT_FOUND

from demo_agent.conversations import Lineup

log = structlog.get_logger("demo_agent.mcp")

CONVERSATION_ID = "io.lineup/conversation_id"
TOOL_CALL_ID = "io.lineup/tool_call_id"
HTTP_STATUS = "io.lineup/http_status"
RECONNECT_SECONDS = 1.0
# Errors about one request: the session itself is fine.
_REQUEST_ERRORS = frozenset({INVALID_PARAMS, METHOD_NOT_FOUND})


@dataclass
class _Call:
    tool: str
    arguments: dict[str, Any]
    meta: dict[str, Any]
    answer: asyncio.Future[types.CallToolResult] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class McpTools:
    """Tool calls through one MCP session, reopened when lost."""

    def __init__(self, base_url: str, agent_token: str) -> None:
        self.url = f"{base_url.rstrip('/')}/mcp"
        self._token = agent_token
        self._calls: asyncio.Queue[_Call] = asyncio.Queue()

    async def call(self, tool: str, arguments: dict[str, Any], meta: dict[str, Any]) -> types.CallToolResult:
        call = _Call(tool, arguments, meta)
        await self._calls.put(call)
        return await call.answer

    async def run(self, stop: asyncio.Event) -> None:
        """Own the session until ``stop``: opened when the first call comes, reopened when lost."""
        waiting: _Call | None = None
        while not stop.is_set():
            if waiting is None:
                nxt = asyncio.ensure_future(self._calls.get())
                await asyncio.wait(
                    {nxt, asyncio.ensure_future(stop.wait())}, return_when=asyncio.FIRST_COMPLETED
                )
                if not nxt.done():
                    nxt.cancel()
                    return
                waiting = nxt.result()
            try:
                await self._serve(stop, waiting)
            except Exception as exc:
                log.warning("mcp_session_lost", url=self.url, error=str(exc) or type(exc).__name__)
            if not waiting.answer.done():
                waiting.answer.set_exception(httpx.TransportError(f"no MCP session at {self.url}"))
            waiting = None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), RECONNECT_SECONDS)

    async def _serve(self, stop: asyncio.Event, first: _Call) -> None:
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {self._token}"})
        async with http, Client(streamable_http_client(self.url, http_client=http)) as client:
            log.info("mcp_session", url=self.url, protocol_version=client.protocol_version)
            lost = asyncio.Event()
            async with anyio.create_task_group() as calls:
                calls.start_soon(_answer, client, first, lost)
                while not (stop.is_set() or lost.is_set()):
                    nxt = asyncio.ensure_future(self._calls.get())
                    ended = asyncio.ensure_future(_first(stop, lost))
                    await asyncio.wait({nxt, ended}, return_when=asyncio.FIRST_COMPLETED)
                    ended.cancel()
                    if not nxt.done():
                        nxt.cancel()
                        break
                    calls.start_soon(_answer, client, nxt.result(), lost)
                calls.cancel_scope.cancel()
            if lost.is_set():
                raise ConnectionError("the MCP session failed; opening a new one")


async def _first(*events: asyncio.Event) -> None:
    waits = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()


async def _answer(client: Client, call: _Call, lost: asyncio.Event) -> None:
    try:
        result = await client.call_tool(call.tool, call.arguments, meta=call.meta)  # type: ignore[arg-type]
    except Exception as exc:
        # The call may not have reached the service: the caller retries it under the same
        # tool_call_id, which replays if it did. A broken transport ends the session.
        request_error = isinstance(exc, MCPError) and exc.code in _REQUEST_ERRORS
        if not (isinstance(exc, ValueError) or request_error):
            lost.set()
        _fail(call, f"MCP call failed: {exc}")
        return
    except BaseException:
        _fail(call, "the MCP session ended before the answer")  # cancelled with its session
        raise
    if not call.answer.done():
        call.answer.set_result(result)


def _fail(call: _Call, reason: str) -> None:
    if not call.answer.done():
        call.answer.set_exception(httpx.TransportError(reason))


class McpLineup(Lineup):
    """The service as the demo Agent sees it, its tools reached over MCP."""

    def __init__(self, http: httpx.AsyncClient, tools: McpTools, agent_token: str, host_token: str) -> None:
        super().__init__(http, agent_token, host_token)
        self.tools = tools

    async def call_tool(
        self, tool_call_id: str, conversation_id: str, tool: str, arguments: dict[str, Any]
    ) -> tuple[int, dict[str, Any]]:
        meta = {CONVERSATION_ID: conversation_id, TOOL_CALL_ID: tool_call_id}
        result = await self.tools.call(tool, arguments, meta)
        body = result.structured_content if isinstance(result.structured_content, dict) else {}
        status = (result.meta or {}).get(HTTP_STATUS)
        if not isinstance(status, int):
            status = 422 if result.is_error else 200
        return status, body

"""The ``mcp`` SDK's own client over real HTTP, as the tests' MCP client.

The SDK's typed client has no calls for the 2025-11-25 task methods (its task types are
types-only), so ``McpSession.request`` sends those through the SDK's own JSON-RPC dispatcher on the
same session, with the negotiated protocol-version header; everything else goes through the typed
``ClientSession``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, cast

import httpx
import httpx_sse
import mcp_types as types
from mcp.client import ClaimContext, ClientExtension, ClientSession, NotificationBinding, ResultClaim
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from pydantic import Field

from harness.tokens import AGENT_TOKEN

#: A handshake-era client's first request, as plain JSON-RPC.
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"},
    },
}
CONVERSATION = "io.lineup/conversation_id"
TOOL_CALL = "io.lineup/tool_call_id"


def bound(conversation_id: str, tool_call_id: str | None = None) -> types.RequestParamsMeta:
    """The ``_meta`` that binds a call to its conversation (and names its tool call)."""
    meta: dict[str, Any] = {CONVERSATION: conversation_id}
    if tool_call_id is not None:
        meta[TOOL_CALL] = tool_call_id
    return cast(types.RequestParamsMeta, meta)


@dataclass
class McpSession:
    session: ClientSession
    dispatcher: JSONRPCDispatcher[Any]
    statuses: asyncio.Queue[types.TaskStatusNotificationParams] = field(default_factory=asyncio.Queue)

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        version = self.session.protocol_version
        assert version is not None
        headers = {MCP_PROTOCOL_VERSION_HEADER: version}
        return await self.dispatcher.send_raw_request(method, params, {"headers": headers, "timeout": 30})

    async def call(self, tool: str, arguments: dict[str, Any], **meta: Any) -> types.CallToolResult:
        return await self.session.call_tool(tool, arguments, meta=bound(**meta))


@contextlib.asynccontextmanager
async def mcp_session(base_url: str, token: str | None = AGENT_TOKEN) -> AsyncIterator[McpSession]:
    """An initialized handshake-era session (``initialize``, then the standalone GET stream)."""
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    statuses: asyncio.Queue[types.TaskStatusNotificationParams] = asyncio.Queue()

    async def on_status(params: types.TaskStatusNotificationParams) -> None:
        await statuses.put(params)

    binding = NotificationBinding(
        method="notifications/tasks/status", params_type=types.TaskStatusNotificationParams, handler=on_status
    )
    http = create_mcp_http_client(headers=headers)
    async with (
        http,
        streamable_http_client(f"{base_url}/mcp", http_client=http) as (read, write),
    ):
        dispatcher: JSONRPCDispatcher[Any] = JSONRPCDispatcher(read, write)
        async with ClientSession(dispatcher=dispatcher, notification_bindings=[binding]) as session:
            await session.initialize()
            yield McpSession(session, dispatcher, statuses)


TASKS = "io.modelcontextprotocol/tasks"
MODERN = "2026-07-28"


@dataclass
class ModernWire:
    """Plain JSON-RPC at 2026-07-28 over HTTP: one self-contained POST per request, as the
    extension's examples show them (no session; ``_meta`` carries the revision, the client and its
    capabilities; the routing headers name the method and the tool or task)."""

    http: httpx.AsyncClient
    url: str
    declares_tasks: bool = True
    next_id: int = 0

    def envelope(self, params: dict[str, Any], *, declares_tasks: bool | None = None) -> dict[str, Any]:
        declared = self.declares_tasks if declares_tasks is None else declares_tasks
        capabilities: dict[str, Any] = {"extensions": {TASKS: {}}} if declared else {}
        meta = {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientInfo": {"name": "wire", "version": "0"},
            "io.modelcontextprotocol/clientCapabilities": capabilities,
            **params.get("_meta", {}),
        }
        return {**params, "_meta": meta}

    def request(
        self,
        method: str,
        params: dict[str, Any],
        *,
        name: str | None = None,
        declares_tasks: bool | None = None,
    ) -> tuple[dict[str, Any], dict[str, str]]:
        """The JSON-RPC body and the headers of one request."""
        self.next_id += 1
        headers = {
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": MODERN,
            "Mcp-Method": method,
        }
        routed = name if name is not None else params.get("taskId", params.get("name"))
        if routed is not None:
            headers["Mcp-Name"] = routed
        body = {
            "jsonrpc": "2.0",
            "id": self.next_id,
            "method": method,
            "params": self.envelope(params, declares_tasks=declares_tasks),
        }
        return body, headers

    @contextlib.asynccontextmanager
    async def stream(self, method: str, params: dict[str, Any], **options: Any) -> AsyncIterator[McpStream]:
        """A request whose answer is an SSE stream (``subscriptions/listen``): its messages, in order."""
        body, headers = self.request(method, params, **options)
        # Not httpx_sse.aconnect_sse: it would send Accept: text/event-stream alone, and a streamable
        # HTTP server requires application/json too.
        async with self.http.stream("POST", self.url, json=body, headers=headers) as response:
            response.raise_for_status()
            yield McpStream(httpx_sse.EventSource(response))

    async def post(
        self,
        method: str,
        params: dict[str, Any],
        *,
        name: str | None = None,
        declares_tasks: bool | None = None,
    ) -> httpx.Response:
        body, headers = self.request(method, params, name=name, declares_tasks=declares_tasks)
        return await self.http.post(self.url, json=body, headers=headers)

    async def result(self, method: str, params: dict[str, Any], **options: Any) -> dict[str, Any]:
        answer = await self.post(method, params, **options)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert "result" in body, body
        return dict(body["result"])

    async def error(self, method: str, params: dict[str, Any], **options: Any) -> dict[str, Any]:
        answer = await self.post(method, params, **options)
        body = answer.json()
        assert "error" in body, body
        return dict(body["error"])


@dataclass
class McpStream:
    source: httpx_sse.EventSource

    async def messages(self) -> AsyncIterator[dict[str, Any]]:
        async for event in self.source.aiter_sse():
            if event.data:
                yield dict(event.json())


@contextlib.asynccontextmanager
async def modern_wire(base_url: str, *, declares_tasks: bool = True) -> AsyncIterator[ModernWire]:
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {AGENT_TOKEN}"}, timeout=30) as http:
        yield ModernWire(http, f"{base_url}/mcp", declares_tasks)


class CreatedTask(types.Result):
    """The extension's ``CreateTaskResult``, as the SDK's client reads a claimed result."""

    result_type: Literal["task"] = Field(alias="resultType")
    task_id: str = Field(alias="taskId")
    status: str
    poll_interval_ms: int | None = Field(default=None, alias="pollIntervalMs")


class GotTask(types.Result):
    """What ``tasks/get`` answers at 2026-07-28 (the parts read here)."""

    task_id: str = Field(alias="taskId")
    status: str
    result: dict[str, Any] | None = None


class GetTask(types.Request[types.GetTaskRequestParams, Literal["tasks/get"]]):
    name_param: ClassVar[str | None] = "taskId"  # sent as Mcp-Name, as the extension has clients do
    method: Literal["tasks/get"] = "tasks/get"
    params: types.GetTaskRequestParams


class TasksExtension(ClientExtension):
    """The smallest client side of ``io.modelcontextprotocol/tasks`` on the SDK's ``Client``: it
    declares the extension and claims ``resultType: "task"``, resolving it by polling ``tasks/get``
    every ``poll_seconds``) into the finished task's tool result."""

    identifier = TASKS

    def __init__(self, poll_seconds: float = 0.2) -> None:
        self.poll_seconds = poll_seconds
        self.task_ids: list[str] = []

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreatedTask, resolve=self._resolve)]

    async def _resolve(self, created: CreatedTask, ctx: ClaimContext) -> types.CallToolResult:
        self.task_ids.append(created.task_id)
        while True:
            request = GetTask(params=types.GetTaskRequestParams(task_id=created.task_id))
            task = await ctx.session.send_request(request, GotTask)
            if task.status == "completed":
                return types.CallToolResult.model_validate(task.result)
            assert task.status == "working", task
            await asyncio.sleep(self.poll_seconds)

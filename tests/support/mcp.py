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
from typing import Any

import mcp_types as types
from mcp.client import ClientSession, NotificationBinding
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher

from tests.conftest import AGENT_TOKEN

CONVERSATION = "io.lineup/conversation_id"
TOOL_CALL = "io.lineup/tool_call_id"


def bound(conversation_id: str, tool_call_id: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {CONVERSATION: conversation_id}
    if tool_call_id is not None:
        meta[TOOL_CALL] = tool_call_id
    return meta


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
        return await self.session.call_tool(tool, arguments, meta=bound(**meta))  # type: ignore[arg-type]


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

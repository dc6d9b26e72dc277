"""An MCP Apps host's side of the wire, as plain JSON-RPC over HTTP: a handshake-era session whose
client declares ``io.modelcontextprotocol/ui`` (as a host that renders MCP Apps does), and the
View's app-only tool calls as such a host forwards them."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import httpx

from tests.conftest import AGENT_TOKEN

UI = "io.modelcontextprotocol/ui"
APP_MIME_TYPE = "text/html;profile=mcp-app"
POMODORO_URI = "ui://pomodoro/timer"
CONVERSATION = "io.lineup/conversation_id"
VIEW_TOKEN = "io.lineup/view_token"
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@dataclass(frozen=True)
class Opened:
    """An accepted ``pomodoro.start``: its operation, the View token a host hands its View, the result."""

    operation_id: str
    token: str
    result: dict[str, Any]


class RpcError(Exception):
    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(error.get("message"))
        self.code = error.get("code")
        self.data = error.get("data")


@dataclass
class AppsHost:
    """One initialized session of a client that renders MCP Apps (or, ``apps=False``, one that
    does not)."""

    base_url: str
    token: str = AGENT_TOKEN
    apps: bool = True
    session_id: str | None = None
    initialized: dict[str, Any] = field(default_factory=dict)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def __post_init__(self) -> None:
        self.http = httpx.Client(timeout=30)
        capabilities: dict[str, Any] = (
            {"extensions": {UI: {"mimeTypes": [APP_MIME_TYPE]}}} if self.apps else {}
        )
        self.initialized = self.request(
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": capabilities,
                "clientInfo": {"name": "apps-host", "version": "0"},
            },
        )
        self._post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> AppsHost:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _post(self, message: dict[str, Any]) -> httpx.Response:
        headers = {**HEADERS, "Authorization": f"Bearer {self.token}"}
        if self.session_id is not None:
            headers |= {"Mcp-Session-Id": self.session_id, "MCP-Protocol-Version": "2025-11-25"}
        answer = self.http.post(f"{self.base_url}/mcp", json=message, headers=headers)
        self.session_id = answer.headers.get("mcp-session-id", self.session_id)
        return answer

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        answer = self._post({"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params})
        assert answer.status_code == 200, answer.text
        body = answer.json()
        if "error" in body:
            raise RpcError(body["error"])
        result: dict[str, Any] = body["result"]
        return result

    def call(
        self, name: str, arguments: dict[str, Any], meta: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        params: dict[str, Any] = {"name": name, "arguments": arguments}
        if meta is not None:
            params["_meta"] = meta
        return self.request("tools/call", params)

    def start(self, conversation_id: str, seconds: int = 1500, activity: str = "write report") -> str:
        """``pomodoro.start`` (as the Agent calls it); the operation id of its acceptance."""
        return self.open(conversation_id, seconds, activity).operation_id

    def open(self, conversation_id: str, seconds: int = 1500, activity: str = "write report") -> Opened:
        """``pomodoro.start`` (as the Agent calls it): its operation and the View token in its result."""
        result = self.call(
            "pomodoro.start",
            {"duration_seconds": seconds, "activity": activity},
            {CONVERSATION: conversation_id},
        )
        assert result["structuredContent"]["status"] == "accepted", result
        operation_id = str(result["structuredContent"]["operation"]["operation_id"])
        return Opened(operation_id, result["_meta"][VIEW_TOKEN] if self.apps else "", result)

    def view(
        self, name: str, arguments: dict[str, Any], meta: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """An app-only tool call as the host forwards the View's: no conversation in ``_meta``."""
        return self.call(name, arguments, meta)

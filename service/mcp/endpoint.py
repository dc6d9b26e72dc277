"""``/mcp`` inside ``serve``: the SDK's streamable HTTP session manager, mounted in Litestar.

The Agent's bearer token is checked here, before the SDK sees the request: no token, or one of
another audience, is ``401`` with the contract's error body. The session manager runs in the
application's lifespan, after the runtime it serves is up, and stops before it goes down.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import msgspec
import structlog
from litestar import Litestar, asgi
from litestar.connection import ASGIConnection
from litestar.types import HTTPResponseBodyEvent, HTTPResponseStartEvent, Message, Receive, Scope, Send
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from service.http import API_HEADERS, TokenBook, bearer_token, error_code, refused
from service.mcp.server import RuntimeMcpServer

log = structlog.get_logger("service.mcp")

PATH = "/mcp"
_API_HEADERS = [(name.lower().encode(), value.encode()) for name, value in API_HEADERS.items()]


class McpFace:
    """The session manager behind the Agent audience's token check."""

    def __init__(
        self, server: RuntimeMcpServer, manager: StreamableHTTPSessionManager, tokens: TokenBook
    ) -> None:
        self.server = server
        self.manager = manager
        self._tokens = tokens

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        connection = ASGIConnection(scope)  # type: ignore[var-annotated]
        token = bearer_token(connection)
        if token is None or not self._tokens.accepts("agent", token):
            body = msgspec.json.encode(refused(connection, "agent").body())
            refusal: HTTPResponseStartEvent = {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"www-authenticate", b'Bearer realm="lineup-agent"'),
                    (b"content-length", str(len(body)).encode()),
                    *_API_HEADERS,
                ],
            }
            await send(refusal)
            answer: HTTPResponseBodyEvent = {"type": "http.response.body", "body": body, "more_body": False}
            await send(answer)
            return
        await self.manager.handle_request(scope, receive, _as_api_answer(send))  # type: ignore[arg-type]


def _as_api_answer(send: Send) -> Send:
    """The SDK's answers with what every API answer carries (``Cache-Control: no-store``,
    ``X-Content-Type-Options: nosniff``); a refusal it words as plain text without a type (a wrong
    ``Content-Type``, say) leaves as the contract's error body."""
    refusal: int | None = None
    text = b""

    async def send_answer(message: Message) -> None:
        nonlocal refusal, text
        if message["type"] == "http.response.start":
            headers = list(message.get("headers", []))
            names = {name.lower() for name, _ in headers}
            if message["status"] >= 400 and b"content-type" not in names:
                refusal = message["status"]
                return
            headers += [header for header in _API_HEADERS if header[0] not in names]
            message = {**message, "headers": headers}
        elif message["type"] == "http.response.body" and refusal is not None:
            text += message.get("body", b"")
            if message.get("more_body", False):
                return
            body = msgspec.json.encode(
                {
                    "error": error_code(refusal),
                    "message": text.decode("utf-8", "replace").strip() or "refused",
                }
            )
            await send(
                {
                    "type": "http.response.start",
                    "status": refusal,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"content-length", str(len(body)).encode()),
                        *_API_HEADERS,
                    ],
                }
            )
            message = {"type": "http.response.body", "body": body, "more_body": False}
        await send(message)

    return send_answer


@asgi(PATH, is_mount=True, copy_scope=True)
async def mcp_endpoint(scope: Scope, receive: Receive, send: Send) -> None:
    face: McpFace = scope["litestar_app"].state.mcp
    await face(scope, receive, send)


@contextlib.asynccontextmanager
async def mcp_lifespan(app: Litestar) -> AsyncIterator[None]:
    """Runs after the lifespan that opens the runtime (it needs ``app.state.runtime``)."""
    server = RuntimeMcpServer(app.state.runtime, app.state.projections)
    manager = StreamableHTTPSessionManager(
        app=server,
        # Every answer is one JSON body: no tool sends anything while it runs, and an SSE stream
        # per POST costs more CPU than the tool call itself. Pushes ride the session's GET stream.
        json_response=True,
        # The bearer token is the guard here: a page of another origin cannot send it, so the
        # SDK's Host/Origin checks (meant for token-less local servers) are not switched on.
        security_settings=None,
        max_request_body_size=app.state.runtime.settings.request_max_body_bytes,
    )
    app.state.mcp = McpFace(server, manager, app.state.tokens)
    async with manager.run():
        try:
            yield
        finally:
            await server.pushes.close()

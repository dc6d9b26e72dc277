"""``/mcp`` inside ``serve``: the SDK's streamable HTTP session manager, mounted in Litestar.

The origin and the bearer token are checked here, before the SDK sees the request. A present
``Origin`` must be an allowed one (``MCP_ALLOWED_ORIGINS``, ``PUBLIC_ORIGIN``), else ``403``; an
allowed one gets CORS headers, and its preflight is answered without credentials. The token is the
Agent's (``AGENT_TOKEN``, which names any conversation) or, with MCP authorization configured, a
person's access token (``service.mcp.oauth``), which binds the request to that person's
conversation. Anything else is ``401`` with the contract's error body and a ``WWW-Authenticate``
challenge naming the protected-resource metadata. The session manager runs in the
application's lifespan, after the runtime it serves is up, and stops before it goes down.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Mapping
from typing import Any

import msgspec
import structlog
from litestar import Litestar, Response, asgi, get
from litestar.connection import ASGIConnection
from litestar.datastructures import State
from litestar.types import HTTPResponseBodyEvent, HTTPResponseStartEvent, Message, Receive, Scope, Send
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from service.domain.errors import NotFound, Unavailable
from service.http import API_HEADERS, TokenBook, bearer_token, error_code, refused
from service.mcp.binding import CONVERSATION_HEADER, header_conversation, person_conversation, person_ends_at
from service.mcp.oauth import TOKEN_MAX_CHARS, Person, ResourceServer, TokenRefused, oversized
from service.mcp.server import RuntimeMcpServer, translated
from service.mcp.sessions import CappedSessionManager, Kind, SessionBook, SessionRefused, opening
from service.use_cases import callers, tasks

log = structlog.get_logger("service.mcp")

PATH = "/mcp"
_API_HEADERS = [(name.lower().encode(), value.encode()) for name, value in API_HEADERS.items()]


#: What a browser may read of an answer (CORS), beyond the safelisted headers.
EXPOSED = b"Mcp-Session-Id, MCP-Protocol-Version, WWW-Authenticate"
_PREFLIGHT_METHODS = b"GET, POST, DELETE, OPTIONS"
_CONVERSATION_HEADER = CONVERSATION_HEADER.lower().encode()
#: Where the person a request's token speaks for rides the ASGI scope to the SDK's handlers.
PERSON = "io.lineup.person"


async def _answer(
    send: Send, status: int, body: dict[str, Any] | None, headers: list[tuple[bytes, bytes]]
) -> None:
    encoded = msgspec.json.encode(body) if body is not None else b""
    start: HTTPResponseStartEvent = {
        "type": "http.response.start",
        "status": status,
        "headers": [
            *([(b"content-type", b"application/json")] if body is not None else []),
            (b"content-length", str(len(encoded)).encode()),
            *headers,
            *_API_HEADERS,
        ],
    }
    await send(start)
    end: HTTPResponseBodyEvent = {"type": "http.response.body", "body": encoded, "more_body": False}
    await send(end)


def _header(scope: Scope, name: bytes) -> str | None:
    """The first header ``name`` (lowercase, as ASGI gives names), as ``connection.headers.get``
    reads it (latin-1), from the scope's raw list: no header mapping is built on every request."""
    for key, value in scope["headers"]:
        if key == name:
            return value.decode("latin-1")
    return None


class McpFace:
    """The session manager behind the origin check and the token check: the Agent's token, or
    (with MCP authorization configured) a person's access token."""

    def __init__(
        self,
        server: RuntimeMcpServer,
        managers: Mapping[Kind, StreamableHTTPSessionManager],
        tokens: TokenBook,
        *,
        origins: frozenset[str] = frozenset(),
        resource: ResourceServer | None = None,
    ) -> None:
        self.server = server
        self.managers = managers  # the Agent's sessions and persons' (service.mcp.sessions)
        self._tokens = tokens
        self._origins = origins
        self.resource = resource

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        connection = ASGIConnection(scope)  # type: ignore[var-annotated]
        cors: list[tuple[bytes, bytes]] = []
        origin = _header(scope, b"origin")
        if origin is not None:
            # The transport's MUST against DNS rebinding: a present Origin must be one we know.
            if origin.lower() not in self._origins:
                message = (
                    f"the origin {origin!r} may not call /mcp (MCP_ALLOWED_ORIGINS lists those that may)"
                )
                await _answer(send, 403, {"error": "forbidden", "message": message}, [(b"vary", b"Origin")])
                return
            cors = [
                (b"access-control-allow-origin", origin.encode()),
                (b"access-control-expose-headers", EXPOSED),
                (b"vary", b"Origin"),
            ]
            if scope.get("method") == "OPTIONS":  # the preflight: answered without credentials
                requested = _header(scope, b"access-control-request-headers") or ""
                await _answer(
                    send,
                    204,
                    None,
                    [
                        *cors,
                        (b"access-control-allow-methods", _PREFLIGHT_METHODS),
                        (b"access-control-allow-headers", requested.encode("latin-1")),
                        (b"access-control-max-age", b"600"),
                    ],
                )
                return
        token = bearer_token(connection)
        if token is not None and len(token) > TOKEN_MAX_CHARS:
            # Refused before it is hashed (the Agent's check) or parsed (a person's): a token of
            # megabytes costs no more than a short one.
            await self._unauthorized(send, cors, oversized())
            return
        if token is not None and self._tokens.accepts("agent", token):
            await self._serve("agent", scope, receive, send, cors, token)
            return
        if token is not None and self.resource is not None:
            try:
                person = await self.resource.authenticate(token)
            except TokenRefused as refusal:
                await self._unauthorized(send, cors, refusal)
                return
            except Unavailable as unavailable:
                body = {"error": "unavailable", "message": unavailable.message}
                await _answer(send, 503, body, [(b"retry-after", b"5"), *cors])
                return
            scope[PERSON] = person  # type: ignore[literal-required]
            # The SDK binds a session to the principal that opened it: another's request on it is 404.
            scope["user"] = _sdk_user(person, token)
            await self._serve("person", scope, receive, send, cors, person)
            return
        body = refused(connection, "agent" if self.resource is None else "mcp").body()
        challenge = self.resource.challenge() if self.resource is not None else 'Bearer realm="lineup-agent"'
        await _answer(send, 401, body, [(b"www-authenticate", challenge.encode()), *cors])

    def leeway(self) -> float:
        return float(self.resource.leeway) if self.resource is not None else 0.0

    async def _unauthorized(self, send: Send, cors: list[tuple[bytes, bytes]], refusal: TokenRefused) -> None:
        """A token refused, saying why: 401 ``invalid_token`` (403 ``insufficient_scope``)."""
        body = {
            "error": "unauthorized" if refusal.status == 401 else "forbidden",
            "message": refusal.description,
        }
        challenge = (
            self.resource.challenge(refusal)
            if self.resource is not None
            else f'Bearer realm="lineup-agent", error="{refusal.error}"'
        )
        await _answer(send, refusal.status, body, [(b"www-authenticate", challenge.encode()), *cors])

    async def _serve(
        self,
        kind: Kind,
        scope: Scope,
        receive: Receive,
        send: Send,
        cors: list[tuple[bytes, bytes]],
        who: str | Person,
    ) -> None:
        """Hand the request to the session manager of its kind; a request that would open a session
        names whom it counts against, and a refused one is answered here (429 or 503)."""
        # Whom a session this request opens would count against, worked out only if it opens one.
        opening.set((who, self.leeway()))
        try:
            await self.managers[kind].handle_request(scope, receive, _as_api_answer(send, cors))  # type: ignore[arg-type]
        except SessionRefused as refused:
            log.warning("mcp_session_refused", kind=kind, status=refused.status, reason=refused.data["error"])
            retry = [(b"retry-after", b"30")]
            await _answer(send, refused.status, refused.body(), [*retry, *cors])


def _sdk_user(person: Person, token: str) -> AuthenticatedUser:
    access = AccessToken(
        token=token,
        client_id=person.client_id,
        scopes=list(person.scopes),
        expires_at=person.expires_at,
        subject=person.subject,
        claims={"iss": person.issuer},
    )
    return AuthenticatedUser(access)


async def as_person(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """Server middleware: a person's request runs bound to that person's conversation
    (``service.mcp.binding``), and a task request of theirs names only a task of it."""
    request = ctx.request
    person: Person | None = request.scope.get(PERSON) if request is not None else None
    if person is None:
        named = _header(request.scope, _CONVERSATION_HEADER) if request is not None else None
        if named is None:
            return await call_next(ctx)
        # The Agent's request may name its conversation in a header (service.mcp.binding).
        header = header_conversation.set(named)
        try:
            return await call_next(ctx)
        finally:
            header_conversation.reset(header)
    own = person.conversation_id
    bound = person_conversation.set(own)
    face: McpFace = request.scope["litestar_app"].state.mcp  # type: ignore[union-attr]
    expiring = person_ends_at.set(person.expires_at + face.leeway())
    # Who calls: recorded with each call, and what its allowance is (service.use_cases.callers).
    calling = callers.current.set(callers.person(person.issuer, person.subject, person.client_id, own))
    try:
        task_id = ctx.params.get("taskId") if isinstance(ctx.params, Mapping) else None
        if isinstance(task_id, str):
            await _own_task(ctx, task_id, own)
        return await call_next(ctx)
    finally:
        callers.current.reset(calling)
        person_ends_at.reset(expiring)
        person_conversation.reset(bound)


async def _own_task(ctx: ServerRequestContext[Any, Any], task_id: str, own: str) -> None:
    """Every task method, at every revision: a task of another conversation is an unknown one."""
    face: McpFace = ctx.request.scope["litestar_app"].state.mcp  # type: ignore[union-attr]
    try:
        task_uuid = uuid.UUID(task_id)
    except ValueError:
        task_uuid = None
    with translated():
        found = task_uuid is not None and await tasks.read_task(face.server.rt, task_uuid, own) is not None
    if not found:
        raise MCPError(INVALID_PARAMS, f"no task {task_id!r}", data={"taskId": task_id})


def _as_api_answer(send: Send, cors: list[tuple[bytes, bytes]]) -> Send:
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
            headers += [header for header in [*_API_HEADERS, *cors] if header[0] not in names]
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
                        *cors,
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
    settings = app.state.runtime.settings
    server = RuntimeMcpServer(app.state.runtime, app.state.projections)
    server.middleware.insert(len(server.tracing), as_person)  # inside the spans, when traced
    book = SessionBook.from_settings(settings)
    idle: dict[Kind, float] = {
        "agent": settings.mcp_agent_session_idle_seconds,
        "person": settings.mcp_person_session_idle_seconds,
    }
    managers: dict[Kind, StreamableHTTPSessionManager] = {
        kind: CappedSessionManager(
            server,
            book,
            # Every answer is one JSON body: no tool sends anything while it runs, and an SSE stream
            # per POST costs more CPU than the tool call itself. Pushes ride the session's GET stream.
            json_response=True,
            # McpFace checks Origin against MCP_ALLOWED_ORIGINS (and answers CORS) before the SDK;
            # the SDK's own Host/Origin checks (meant for token-less local servers) are not on.
            security_settings=None,
            max_request_body_size=settings.request_max_body_bytes,
            session_idle_timeout=idle[kind],
        )
        for kind in idle
    }
    resource = ResourceServer(settings) if settings.mcp_resource is not None else None
    app.state.mcp = McpFace(
        server, managers, app.state.tokens, origins=settings.mcp_origins, resource=resource
    )
    async with managers["agent"].run(), managers["person"].run():
        try:
            yield
        finally:
            await server.pushes.close()
            if resource is not None:
                await resource.close()


@get(
    ["/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"],
    include_in_schema=False,
    sync_to_thread=False,
)
def protected_resource_metadata(state: State) -> Response[dict[str, Any]]:
    """RFC 9728's metadata of ``/mcp`` (at the well-known path, and suffixed with the resource's
    path as MCP clients look first): the authorization servers and scopes. Public, so any origin."""
    face: McpFace = state.mcp
    if face.resource is None:
        raise NotFound("MCP authorization is not configured here (MCP_OAUTH_ISSUER)", code="not_found")
    return Response(
        face.resource.metadata(),
        headers={"Access-Control-Allow-Origin": "*", "Cache-Control": "public, max-age=300"},
    )

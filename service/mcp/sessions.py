"""MCP sessions, capped per principal: one person cannot take ``/mcp`` from everyone.

A handshake-era client (``initialize``, up to 2025-11-25) gets a session that lives in this
process's memory until it is deleted or goes idle. The SDK's session manager caps them only per
process (10,000 by default, 30 minutes idle), so one person's ``initialize`` loop would fill the
table and lock everyone out. Here every session counts against its principal — a person (issuer,
subject, client) or an Agent token — and its kind:

* a principal past its cap (``MCP_SESSIONS_PER_PERSON``, ``MCP_SESSIONS_PER_AGENT_TOKEN``) is
  refused ``429`` with a JSON-RPC error body; its open sessions are unaffected;
* persons together never hold the last ``MCP_AGENT_RESERVED_SESSIONS`` of ``MCP_MAX_SESSIONS``,
  so the Agent can always open one; past either limit the opener is refused ``503``;
* persons' sessions end after ``MCP_PERSON_SESSION_IDLE_SECONDS`` without a request, the Agent's
  after ``MCP_AGENT_SESSION_IDLE_SECONDS``.

The Agent's sessions and persons' have a manager each (the SDK sets the idle timeout per manager);
both count in one ``SessionBook``. A 2026-07-28 request opens no session and is not counted.
``lineup_mcp_sessions{kind}`` and ``lineup_mcp_sessions_refused_total{kind,reason}`` show them.
"""

from __future__ import annotations

import contextvars
import hashlib
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import structlog
from mcp.server.auth.middleware.bearer_auth import AuthorizationContext
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from service.mcp.oauth import Person
from service.metrics import MCP_SESSIONS, MCP_SESSIONS_REFUSED
from service.settings import Settings

log = structlog.get_logger("service.mcp")

Kind = Literal["agent", "person"]
#: JSON-RPC's implementation-defined server error: the code of a refused session.
SESSIONS_REFUSED = -32000


@dataclass(frozen=True, slots=True)
class Principal:
    """Whom a session counts against: an Agent token (by its digest) or a person's key."""

    kind: Kind
    key: tuple[str, ...]
    #: When the credential that opens the session stops being valid (a person's token's ``exp`` plus
    #: the clock leeway, epoch seconds): the session ends then. Not part of whom it counts against.
    ends_at: float | None = field(default=None, compare=False)

    @classmethod
    def agent(cls, token: str) -> Principal:
        return cls("agent", (hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest(),))

    @classmethod
    def person(cls, issuer: str, subject: str, client_id: str, ends_at: float | None = None) -> Principal:
        return cls("person", (issuer, subject, client_id), ends_at)


#: The principal of the request being served, for the manager's admission of a new session.
#: The request's credential: the Agent's token, or the person (with the leeway past their ``exp``).
opening: contextvars.ContextVar[tuple[str | Person, float] | None] = contextvars.ContextVar(
    "mcp_opening", default=None
)


def principal_of(who: str | Person, leeway: float) -> Principal:
    if isinstance(who, str):
        return Principal.agent(who)
    return Principal.person(who.issuer, who.subject, who.client_id, who.expires_at + leeway)


class SessionRefused(Exception):  # noqa: N818 - a refusal is an answer, not a fault
    """A new session refused: ``status`` 429 (the principal's cap) or 503 (the process's limit)."""

    def __init__(self, status: int, message: str, data: dict[str, Any]) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.data = data

    def body(self) -> dict[str, Any]:
        """The JSON-RPC error body the refusal is answered with (no request id: none was read)."""
        return {
            "jsonrpc": "2.0",
            "id": None,
            "error": {"code": SESSIONS_REFUSED, "message": self.message, "data": self.data},
        }


@dataclass
class SessionBook:
    """The open sessions of this process, by kind and by principal, and the limits on them."""

    max_sessions: int
    agent_reserved: int
    per_person: int
    per_agent_token: int
    person_idle_seconds: float
    open: Counter[Principal] = field(default_factory=Counter)
    by_kind: Counter[str] = field(default_factory=Counter)

    @classmethod
    def from_settings(cls, settings: Settings) -> SessionBook:
        return cls(
            settings.mcp_max_sessions,
            settings.mcp_agent_reserved_sessions,
            settings.mcp_sessions_per_person,
            settings.mcp_sessions_per_agent_token,
            settings.mcp_person_session_idle_seconds,
        )

    def admit(self, principal: Principal) -> None:
        """Count one more session of ``principal``, or raise ``SessionRefused`` saying why not."""
        kind = principal.kind
        cap = self.per_person if kind == "person" else self.per_agent_token
        if self.open[principal] >= cap:
            MCP_SESSIONS_REFUSED.labels(kind, "principal").inc()
            what = "person (issuer, subject and client)" if kind == "person" else "Agent token"
            ending = (
                f"or wait for one to end after {self.person_idle_seconds:g} s without a request"
                if kind == "person"
                else "or wait for one to end"
            )
            raise SessionRefused(
                429,
                f"too many open MCP sessions: at most {cap} per {what}; close one (DELETE /mcp with "
                f"its Mcp-Session-Id) {ending}",
                {"error": "too_many_sessions", "kind": kind, "limit": cap},
            )
        total = sum(self.by_kind.values())
        limit = self.max_sessions - self.agent_reserved if kind == "person" else self.max_sessions
        if (self.by_kind["person"] if kind == "person" else total) >= limit or total >= self.max_sessions:
            MCP_SESSIONS_REFUSED.labels(kind, "full").inc()
            raise SessionRefused(
                503,
                "this server holds as many MCP sessions as it may; retry later",
                {"error": "unavailable", "kind": kind, "limit": limit},
            )
        self.open[principal] += 1
        self.by_kind[kind] += 1
        MCP_SESSIONS.labels(kind).inc()

    def release(self, principal: Principal) -> None:
        self.open[principal] -= 1
        if self.open[principal] <= 0:
            del self.open[principal]
        self.by_kind[principal.kind] -= 1
        MCP_SESSIONS.labels(principal.kind).dec()


class CappedSessionManager(StreamableHTTPSessionManager):
    """The SDK's session manager, admitting a new session only as its ``SessionBook`` allows (the
    principal is the ``opening`` one) and releasing it however it ends. The SDK's own per-process
    limit is left off: the book is the limit."""

    def __init__(self, app: Any, book: SessionBook, **kwargs: Any) -> None:
        super().__init__(app, max_sessions=None, **kwargs)
        self._book = book
        self._principals: dict[str, Principal] = {}

    def _admit_session(self, requestor: AuthorizationContext | None) -> StreamableHTTPServerTransport | None:
        credential = opening.get()
        if credential is None:  # not through McpFace: nothing to count it against
            raise SessionRefused(
                503, "no principal for this session", {"error": "unavailable", "kind": "unknown"}
            )
        principal = principal_of(*credential)
        self._book.admit(principal)  # raises SessionRefused, answered by McpFace
        transport = super()._admit_session(requestor)
        if transport is None or transport.mcp_session_id is None:
            self._book.release(principal)
            return transport
        self._principals[transport.mcp_session_id] = principal
        if principal.ends_at is not None and self._task_group is not None:
            self._task_group.start_soon(self._expire, transport.mcp_session_id, transport, principal.ends_at)
        return transport

    async def _expire(
        self, session_id: str, transport: StreamableHTTPServerTransport, ends_at: float
    ) -> None:
        """A person's session (its GET stream and all) ends when the token that opened it expires
        (``exp`` plus the leeway): nothing they opened outlives their token. The client opens a
        new session with a fresh token (its next request on this one is 404)."""
        await anyio.sleep(max(ends_at - time.time(), 0.0))
        if self._server_instances.get(session_id) is transport:
            log.info("mcp_session_expired", session=session_id[:8])
            await self._discard_session(session_id, transport)

    async def _discard_session(self, session_id: str, transport: StreamableHTTPServerTransport) -> None:
        principal = self._principals.pop(session_id, None)  # discarded once, however often called
        if principal is not None:
            self._book.release(principal)
        await super()._discard_session(session_id, transport)

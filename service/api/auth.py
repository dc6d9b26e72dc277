"""Bearer tokens per audience, compared in constant time; on the Host API, persons' sessions too."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable
from typing import Any

from litestar import Request
from litestar.connection import ASGIConnection

from service.api import host_scope
from service.api.host_session import cookie_session
from service.api.state import runtime_of
from service.domain.errors import Unauthenticated
from service.use_cases import host_sessions
from service.use_cases.host_sessions import BACKEND, HostPrincipal, SessionTokens

# The document's security requirement of each audience (schemes in service/api/document.py).
AGENT_SECURITY: list[dict[str, list[str]]] = [{"agent": []}]
HOST_SECURITY: list[dict[str, list[str]]] = [{"host": []}, {"hostSession": []}]
OPERATOR_SECURITY: list[dict[str, list[str]]] = [{"operator": []}]
CAPABILITY_SECURITY: list[dict[str, list[str]]] = [{"capability": []}]

# Credentials are checked in a controller's ``before_request`` hook rather than in a Litestar guard:
# Litestar copies the route handler object for every guard call, about 60 us of CPU per request.


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


class TokenBook:
    """The accepted tokens of each audience, kept as digests; several per audience for rotation."""

    def __init__(self, tokens: dict[str, Iterable[str]]) -> None:
        self._digests = {audience: [_digest(t) for t in values] for audience, values in tokens.items()}

    def accepts(self, audience: str, token: str) -> bool:
        presented = _digest(token)
        accepted = False
        # Compare against every token of the audience: the time taken says nothing about which.
        for digest in self._digests.get(audience, []):
            accepted |= hmac.compare_digest(presented, digest)
        return accepted


#: What each audience's endpoints take, as a refusal names it.
NEEDS = {
    "agent": "AGENT_TOKEN",
    "host": "HOST_TOKEN or a person's session",
    "operator": "OPERATOR_TOKEN (or the console's sign-in)",
    "capability": "an instance capability",
}


def refused(connection: ASGIConnection, audience: str) -> Unauthenticated:  # type: ignore[type-arg]
    """The 401 of a request without an accepted credential, saying what is wrong with it: none
    sent, a header that is not ``Bearer <token>``, or a token this API does not take (whether it
    is another audience's or no one's, it does not say)."""
    return Unauthenticated(unauthorized_message(connection.headers.get("authorization"), audience))


def unauthorized_message(header: str | None, audience: str) -> str:
    needs = NEEDS[audience]
    if not header:
        return f"no credentials: send Authorization: Bearer <{needs}>"
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return f'the Authorization header must read "Bearer <token>"; this API takes {needs}'
    return f"this token is not accepted here: this API takes {needs}"


def bearer_token(connection: ASGIConnection) -> str | None:  # type: ignore[type-arg]
    header = connection.headers.get("authorization")
    if not header:
        return None
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


class require:  # noqa: N801 - reads as a verb where controllers use it
    """The check of one audience's credentials, run before every handler of a controller
    (``before_request = require("agent")``).

    A coroutine: Litestar would run a plain function in a worker thread, a thread hop per request.
    """

    def __init__(self, audience: str) -> None:
        self.audience = audience

    async def __call__(self, connection: Request[Any, Any, Any]) -> None:
        book: TokenBook = connection.app.state.tokens
        token = bearer_token(connection)
        if token is not None and book.accepts(self.audience, token):
            if self.audience == "host":
                connection.state.principal = BACKEND
            return
        if self.audience == "host":
            principal = await _person(connection, token)
            if principal is not None:
                await host_scope.enforce(connection, principal)
                connection.state.principal = principal
                return
        raise refused(connection, self.audience)


async def _person(connection: Request[Any, Any, Any], bearer: str | None) -> HostPrincipal | None:
    """A person's session: its token as the bearer token, or in the host page's cookie."""
    settings = runtime_of(connection).settings
    token = bearer or cookie_session(connection, secure=settings.cookie_secure)
    if token is None:
        return None
    tokens: SessionTokens = connection.app.state.session_tokens
    return await host_sessions.resolve(runtime_of(connection), tokens, token)


def principal_of(request: Request[Any, Any, Any]) -> HostPrincipal:
    """Who called this Host API request (set by ``require("host")``)."""
    principal: HostPrincipal = request.state.principal
    return principal

"""The REST API's credential checks: bearer tokens per audience (``service.http``), compared in
constant time; on the Host API, persons' sessions too; on the ops API, the operator console's
sign-ins (``service.web.console_access``)."""

from __future__ import annotations

from typing import Any

from litestar import Request

from service.api import host_scope
from service.http import TokenBook, bearer_token, refused
from service.use_cases import host_sessions
from service.use_cases.host_sessions import BACKEND, HostPrincipal, SessionTokens
from service.web.console_access import console_cookie
from service.web.host_cookie import cookie_session
from service.web.state import runtime_of

# The document's security requirement of each audience (schemes in service/api/document.py).
AGENT_SECURITY: list[dict[str, list[str]]] = [{"agent": []}]
HOST_SECURITY: list[dict[str, list[str]]] = [{"host": []}, {"hostSession": []}]
#: The ops API's: the operator token, or the operator console's cookie.
OPS_SECURITY: list[dict[str, list[str]]] = [{"operator": []}, {"operatorSession": []}]
CAPABILITY_SECURITY: list[dict[str, list[str]]] = [{"capability": []}]

# Credentials are checked in a controller's ``before_request`` hook rather than in a Litestar guard:
# Litestar copies the route handler object for every guard call, about 60 us of CPU per request.


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


class _RequireOps:
    """``before_request`` of the ops API: the operator token, or the console's cookie (a coroutine,
    as ``require``, to stay off the worker threads)."""

    async def __call__(self, connection: Request[Any, Any, Any]) -> None:
        book: TokenBook = connection.app.state.tokens
        token = bearer_token(connection)
        if token is not None and book.accepts("operator", token):
            return
        if await console_cookie(connection):
            return
        raise refused(connection, "operator")


require_ops = _RequireOps()

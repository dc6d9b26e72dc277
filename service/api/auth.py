"""Bearer tokens per audience, compared in constant time; the Web Host's session cookie on /v1/host/."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable
from typing import Any

from litestar import Request
from litestar.connection import ASGIConnection

from service.api.host_session import COOKIE_NAME, HostSessions
from service.domain.errors import unauthorized

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


def bearer_token(connection: ASGIConnection) -> str | None:  # type: ignore[type-arg]
    header = connection.headers.get("authorization")
    if not header:
        return None
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


#: The only paths where the session cookie stands in for ``Bearer $HOST_TOKEN``.
SESSION_PATH_PREFIX = "/v1/host/"
_UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_BROWSER_SITES = frozenset({"same-origin", "none"})


def host_session(connection: ASGIConnection) -> bool:  # type: ignore[type-arg]
    """A valid Web Host session cookie on a Host API request the host page itself can have made.

    Besides SameSite=Strict: an unsafe method must carry ``Content-Type: application/json`` (a
    cross-site form cannot, and a cross-site fetch with it needs a CORS preflight this service never
    grants), and a browser's ``Sec-Fetch-Site``, when present, must say the request is same-origin.
    """
    if not connection.url.path.startswith(SESSION_PATH_PREFIX):
        return False
    sessions: HostSessions = connection.app.state.host_sessions
    if not sessions.valid(connection.cookies.get(COOKIE_NAME)):
        return False
    site = connection.headers.get("sec-fetch-site")
    if site is not None and site not in _BROWSER_SITES:
        return False
    if connection.scope.get("method", "GET") in _UNSAFE_METHODS:
        media_type = connection.headers.get("content-type", "").partition(";")[0].strip().lower()
        return media_type == "application/json"
    return True


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
            return
        if self.audience == "host" and host_session(connection):
            return
        raise unauthorized()

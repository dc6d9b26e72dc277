"""Whether a request carries an open console sign-in: the console's cookie standing for the operator
token on ``/v1/ops/*`` (``service.api.auth.require_ops``).

It stands there only, and only for a request the console page itself can have made: a write with it
needs ``Sec-Fetch-Site: same-origin``, an ``Origin`` (when sent) of this host and ``Content-Type:
application/json`` — which no cross-site form can send, and no cross-site script without a CORS
preflight this service never grants.
"""

from __future__ import annotations

from uuid import UUID

from litestar.connection import ASGIConnection

from service.use_cases import console_sessions
from service.web.console_cookie import ConsoleSessions, cookie_name
from service.web.host_cookie import same_site
from service.web.state import runtime_of

SESSION_PATH_PREFIX = "/v1/ops/"
_UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_BROWSER_SITES = frozenset({"same-origin", "none"})


def sessions(connection: ASGIConnection) -> ConsoleSessions:  # type: ignore[type-arg]
    signer: ConsoleSessions = connection.app.state.console_sessions
    return signer


def secure(connection: ASGIConnection) -> bool:  # type: ignore[type-arg]
    """COOKIE_SECURE: the cookie is Secure and __Host- prefixed, as the Web Host's."""
    return bool(connection.app.state.runtime.settings.cookie_secure)


def cookie(connection: ASGIConnection) -> str | None:  # type: ignore[type-arg]
    return connection.cookies.get(cookie_name(secure(connection)))


def _from_console(connection: ASGIConnection) -> bool:  # type: ignore[type-arg]
    """An ops API request the console page itself can have made."""
    site = connection.headers.get("sec-fetch-site")
    if connection.scope.get("method", "GET") not in _UNSAFE_METHODS:
        return site is None or site in _BROWSER_SITES
    media_type = connection.headers.get("content-type", "").partition(";")[0].strip().lower()
    return site == "same-origin" and same_site(connection) and media_type == "application/json"


async def open_session(connection: ASGIConnection) -> UUID | None:  # type: ignore[type-arg]
    """The sign-in the console cookie names, while it is open (signed under a configured token,
    young enough, and neither ended nor expired in the database)."""
    session_id = sessions(connection).session_id(cookie(connection))
    if session_id is None or not await console_sessions.is_open(runtime_of(connection), session_id):
        return None
    return session_id


async def console_cookie(connection: ASGIConnection) -> bool:  # type: ignore[type-arg]
    """A console cookie of an open sign-in, on an ops API request the console page itself can
    have made."""
    if not connection.url.path.startswith(SESSION_PATH_PREFIX) or not _from_console(connection):
        return False
    return await open_session(connection) is not None

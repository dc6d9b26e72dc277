"""The operator console (``/ops/``): sign-in, its session cookie, its pages, and the operator
credential check of ``/v1/ops/*`` (``Bearer $OPERATOR_TOKEN`` or that cookie).

The cookie follows the Web Host's rules: HttpOnly, SameSite=Strict, signed (``console_cookie``),
a name of its own, Secure over https; it names a server-side sign-in (``console_sessions``), which
signing out ends on every replica. It stands for the operator token on ``/v1/ops/*`` only; a
write with it needs ``Sec-Fetch-Site: same-origin``, an ``Origin`` (when sent) of this host and
``Content-Type: application/json`` — which no cross-site form can send, and no cross-site script
without a CORS preflight this service never grants. Signing in is refused from another site.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from litestar import Controller, Request, Response, get, post
from litestar.connection import ASGIConnection
from litestar.datastructures import Cookie
from litestar.params import FromPath
from litestar.response import Redirect

from service.api.console_cookie import ConsoleSessions, cookie_name
from service.api.host_cookie import same_site
from service.api.state import runtime_of
from service.api.web import asset_response
from service.http import TokenBook, bearer_token, refused
from service.use_cases import console_sessions
from web_host.assets import catalogue
from web_host.console_pages import console_path, page_headers, signin_page

#: The ops API's security requirement: the operator token, or the console's cookie.
OPERATOR_CONSOLE_SECURITY: list[dict[str, list[str]]] = [{"operator": []}, {"operatorSession": []}]
SESSION_PATH_PREFIX = "/v1/ops/"
HTML = "text/html"
_UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_BROWSER_SITES = frozenset({"same-origin", "none"})


def _sessions(connection: ASGIConnection) -> ConsoleSessions:  # type: ignore[type-arg]
    sessions: ConsoleSessions = connection.app.state.console_sessions
    return sessions


def _secure(connection: ASGIConnection) -> bool:  # type: ignore[type-arg]
    """COOKIE_SECURE: the cookie is Secure and __Host- prefixed, as the Web Host's."""
    return bool(connection.app.state.runtime.settings.cookie_secure)


def _cookie(connection: ASGIConnection) -> str | None:  # type: ignore[type-arg]
    return connection.cookies.get(cookie_name(_secure(connection)))


def _from_console(connection: ASGIConnection) -> bool:  # type: ignore[type-arg]
    """An ops API request the console page itself can have made."""
    site = connection.headers.get("sec-fetch-site")
    if connection.scope.get("method", "GET") not in _UNSAFE_METHODS:
        return site is None or site in _BROWSER_SITES
    media_type = connection.headers.get("content-type", "").partition(";")[0].strip().lower()
    return site == "same-origin" and same_site(connection) and media_type == "application/json"


async def _open_session(connection: ASGIConnection) -> UUID | None:  # type: ignore[type-arg]
    """The sign-in the console cookie names, while it is open (signed under a configured token,
    young enough, and neither ended nor expired in the database)."""
    session_id = _sessions(connection).session_id(_cookie(connection))
    if session_id is None or not await console_sessions.is_open(runtime_of(connection), session_id):
        return None
    return session_id


async def console_cookie(connection: ASGIConnection) -> bool:  # type: ignore[type-arg]
    """A console cookie of an open sign-in, on an ops API request the console page itself can
    have made."""
    if not connection.url.path.startswith(SESSION_PATH_PREFIX) or not _from_console(connection):
        return False
    return await _open_session(connection) is not None


class _RequireOperator:
    """``before_request`` of the ops API: the operator token, or the console's cookie (a coroutine,
    as ``service.api.auth.require``, to stay off the worker threads)."""

    async def __call__(self, connection: Request[Any, Any, Any]) -> None:
        book: TokenBook = connection.app.state.tokens
        token = bearer_token(connection)
        if token is not None and book.accepts("operator", token):
            return
        if await console_cookie(connection):
            return
        raise refused(connection, "operator")


require_operator = _RequireOperator()


async def _signed_in(request: Request[Any, Any, Any]) -> bool:
    return await _open_session(request) is not None


def _signin(next_path: str, error: str | None, status: int) -> Response[bytes]:
    return Response(
        signin_page(next_path, error), status_code=status, media_type=HTML, headers=page_headers()
    )


async def _page(request: Request[Any, Any, Any]) -> Response[bytes]:
    """The console's one page shell (its script draws the view the address names), or the
    sign-in page that returns here."""
    if not await _signed_in(request):
        query = request.url.query
        return _signin(request.url.path + (f"?{query}" if query else ""), None, 200)
    page = catalogue()["ops/index.html"]
    return Response(page.body, media_type=HTML, headers=page_headers())


class ConsoleController(Controller):
    path = "/ops"
    include_in_schema = False

    @get(["/", "/outbox", "/operations", "/tool-calls"])
    async def page(self, request: Request[Any, Any, Any]) -> Response[bytes]:
        return await _page(request)

    @get("/trace/{tool_call_id:path}")
    async def trace_page(self, request: Request[Any, Any, Any]) -> Response[bytes]:
        return await _page(request)

    @get("/static/{name:str}")
    async def asset(self, name: FromPath[str], request: Request[Any, Any, Any]) -> Response[bytes]:
        return asset_response(request, f"ops/{name}")

    @post("/session", status_code=303)
    async def sign_in(self, request: Request[Any, Any, Any]) -> Response[Any]:
        form = await request.form()
        next_path = console_path(form.get("next"))
        if not same_site(request):
            return _signin(next_path, "Sign in from the console's own page.", 403)
        token = form.get("token")
        token = token.strip() if isinstance(token, str) else ""
        book: TokenBook = request.app.state.tokens
        if not token or not book.accepts("operator", token):
            return _signin(next_path, "That is not the operator token.", 401)
        sessions = _sessions(request)
        session_id = await console_sessions.open_session(runtime_of(request), sessions.lifetime_seconds)
        cookie = Cookie(
            key=cookie_name(_secure(request)),
            value=sessions.issue(token, session_id),
            max_age=sessions.lifetime_seconds,
            path="/",
            httponly=True,
            samesite="strict",
            secure=_secure(request),
        )
        headers = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"}
        return Redirect(next_path, status_code=303, cookies=[cookie], headers=headers)

    @post("/sign-out", status_code=303)
    async def sign_out(self, request: Request[Any, Any, Any]) -> Response[Any]:
        if not same_site(request):
            return _signin("/ops/", "Sign out from the console's own page.", 403)
        # Ended in the database: the same cookie value, kept anywhere, no longer works.
        session_id = _sessions(request).session_id(_cookie(request))
        if session_id is not None:
            await console_sessions.end(runtime_of(request), session_id)
        secure = _secure(request)
        cookie = Cookie(
            key=cookie_name(secure),
            value="",
            max_age=0,
            path="/",
            httponly=True,
            samesite="strict",
            secure=secure,
        )
        return Redirect("/ops/", status_code=303, cookies=[cookie], headers={"Cache-Control": "no-store"})

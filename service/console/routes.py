"""The operator console's routes (``/ops/``): its page shell, its files, sign-in and sign-out.

The cookie follows the Web Host's rules: HttpOnly, SameSite=Strict, signed (``service.web.console_cookie``),
a name of its own, Secure over https; it names a server-side sign-in (``console_sessions``), which
signing out ends on every replica. What it may do on ``/v1/ops/*`` is ``service.web.console_access``'s to
say. Signing in is refused from another site.
"""

from __future__ import annotations

from typing import Any

from litestar import Controller, Request, Response, get, post
from litestar.datastructures import Cookie
from litestar.params import FromPath
from litestar.response import Redirect

from service.console.pages import catalogue, console_path, page_headers, shell, signin_page
from service.host_names import allowed_host
from service.http import TokenBook
from service.use_cases import console_sessions
from service.web import console_access as access
from service.web.assets import asset_response
from service.web.console_cookie import cookie_name
from service.web.host_cookie import same_site
from service.web.state import runtime_of

HTML = "text/html"


async def _signed_in(request: Request[Any, Any, Any]) -> bool:
    return await access.open_session(request) is not None


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
    return Response(shell(request.app.state.registry), media_type=HTML, headers=page_headers())


class ConsoleController(Controller):
    path = "/ops"
    include_in_schema = False
    # Its sign-in answers without a token: only to the service's own Host names (DNS rebinding).
    guards = [allowed_host]

    @get(["/", "/outbox", "/operations", "/tool-calls"])
    async def page(self, request: Request[Any, Any, Any]) -> Response[bytes]:
        return await _page(request)

    @get("/trace/{tool_call_id:path}")
    async def trace_page(self, request: Request[Any, Any, Any]) -> Response[bytes]:
        return await _page(request)

    @get("/static/{name:str}")
    async def asset(self, name: FromPath[str], request: Request[Any, Any, Any]) -> Response[bytes]:
        return asset_response(request, catalogue(), name)

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
        signer = access.sessions(request)
        session_id = await console_sessions.open_session(runtime_of(request), signer.lifetime_seconds)
        cookie = Cookie(
            key=cookie_name(access.secure(request)),
            value=signer.issue(token, session_id),
            max_age=signer.lifetime_seconds,
            path="/",
            httponly=True,
            samesite="strict",
            secure=access.secure(request),
        )
        headers = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"}
        return Redirect(next_path, status_code=303, cookies=[cookie], headers=headers)

    @post("/sign-out", status_code=303)
    async def sign_out(self, request: Request[Any, Any, Any]) -> Response[Any]:
        if not same_site(request):
            return _signin("/ops/", "Sign out from the console's own page.", 403)
        # Ended in the database: the same cookie value, kept anywhere, no longer works.
        session_id = access.sessions(request).session_id(access.cookie(request))
        if session_id is not None:
            await console_sessions.end(runtime_of(request), session_id)
        secure = access.secure(request)
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

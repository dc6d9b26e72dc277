"""The Web Reference Host's pages: sign-in, the host page, MiniApp pages, the SDK and their assets.

The host page, its files and the SDK are the Web Host's (``web_host/static/``); a MiniApp's page
and files are its own folder's (``service/apps/<app>/surface/``), found through the registry, so
the Web Host knows of no app."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from litestar import Controller, Request, Response, get, post
from litestar.params import FromPath
from litestar.response import Redirect

from service import assets
from service.assets import Asset
from service.clock import CLOCK
from service.domain.errors import Forbidden, not_found, unauthorized
from service.domain.ids import is_recorded_id
from service.domain.timefmt import rfc3339
from service.host_names import allowed_host
from service.host_streams import HostStreams
from service.http import API_HEADERS, TokenBook
from service.use_cases import host_sessions
from service.use_cases.host_sessions import (
    HOST_TOKEN_SESSION_SECONDS,
    SIGNED_IN_WITH_HOST_TOKEN,
    HostPrincipal,
    SessionTokens,
)
from service.web.assets import asset_response
from service.web.host_cookie import cleared_cookie, cookie_name, same_site, session_cookie
from service.web.state import runtime_of
from web_host.assets import STATIC_DIR
from web_host.pages import app_page_headers, host_page_headers, host_url, signin_page

HTML = "text/html"


def catalogue() -> dict[str, Asset]:
    """Every servable file of the Web Host by its path under ``web_host/static/`` (``host/…``,
    ``sdk/…``), read once."""
    return assets.catalogue(STATIC_DIR)


def surface(request: Request[Any, Any, Any], app_scope: str) -> dict[str, Asset]:
    """Every servable file of a workspace app's page by its name under its ``surface/``, read once;
    404 for an app without one."""
    app = runtime_of(request).registry.app(app_scope)
    if app is None or app.surface is None:
        raise not_found("app")
    return assets.catalogue(app.surface)


def valid_conversation_id(value: object) -> str | None:
    if is_recorded_id(value):
        return value
    return None


def _tokens(request: Request[Any, Any, Any]) -> SessionTokens:
    tokens: SessionTokens = request.app.state.session_tokens
    return tokens


def _json(request: Request[Any, Any, Any]) -> bool:
    return request.headers.get("content-type", "").partition(";")[0].strip().lower() == "application/json"


def _secure(request: Request[Any, Any, Any]) -> bool:
    return runtime_of(request).settings.cookie_secure


async def _signed_in(request: Request[Any, Any, Any]) -> tuple[str, HostPrincipal] | None:
    """The session of the host page's cookie, while it is live."""
    token = request.cookies.get(cookie_name(_secure(request)))
    if not token:
        return None
    principal = await host_sessions.resolve(runtime_of(request), _tokens(request), token)
    return None if principal is None else (token, principal)


def _signin(conversation_id: str | None, error: str | None, status: int) -> Response[bytes]:
    return Response(
        signin_page(conversation_id, error),
        status_code=status,
        media_type=HTML,
        headers=host_page_headers(),
    )


class WebHostController(Controller):
    include_in_schema = False

    @get("/host/", guards=[allowed_host])
    async def host_page(self, request: Request[Any, Any, Any]) -> Response[bytes]:
        if await _signed_in(request) is None:
            conversation_id = valid_conversation_id(request.query_params.get("conversation_id"))
            return _signin(conversation_id, None, 200)
        page = catalogue()["host/index.html"]
        return Response(page.body, media_type=HTML, headers=host_page_headers())

    @post("/host/session", status_code=303, guards=[allowed_host])
    async def sign_in(self, request: Request[Any, Any, Any]) -> Response[Any]:
        """Sign in with a person's session token (minted by the Host backend), or with HOST_TOKEN
        itself where HOST_TOKEN_SIGN_IN allows it; refused cross-site."""
        form = await request.form()
        token, conversation_id = form.get("token"), valid_conversation_id(form.get("conversation_id"))
        if not same_site(request):
            return _signin(conversation_id, "Sign in from this site's own page.", 403)
        token = token.strip() if isinstance(token, str) else ""
        runtime, tokens = runtime_of(request), _tokens(request)
        session = await host_sessions.resolve(runtime, tokens, token) if token else None
        lifetime = 3600
        if session is None:
            book: TokenBook = request.app.state.tokens
            if not (token and runtime.settings.host_token_sign_in and book.accepts("host", token)):
                return _signin(conversation_id, "That is not a valid session.", 401)
            if not tokens.enabled:
                return _signin(conversation_id, "Sessions are not configured (HOST_SESSION_SECRET).", 503)
            minted = await host_sessions.mint(
                runtime, tokens, SIGNED_IN_WITH_HOST_TOKEN, None, HOST_TOKEN_SESSION_SECONDS
            )
            token, lifetime = minted["session"], HOST_TOKEN_SESSION_SECONDS
        cookie = session_cookie(token, lifetime, secure=_secure(request))
        headers = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"}
        return Redirect(host_url(conversation_id), status_code=303, cookies=[cookie], headers=headers)

    @post("/host/session/preview", status_code=200, guards=[allowed_host])
    async def preview(self, request: Request[Any, Any, Any]) -> Response[dict[str, Any]]:
        """Whom a token signs in as, and where it reaches, without signing in: the sign-in page
        shows it before the person acts. Same-origin with a JSON body only; no cookie is set."""
        if not same_site(request) or not _json(request):
            raise Forbidden("preview a sign-in from this site's own page")
        body = await request.json()
        token = body.get("token") if isinstance(body, dict) else None
        if not isinstance(token, str) or not 1 <= len(token.strip()) <= 2048:
            raise unauthorized()
        token = token.strip()
        runtime = runtime_of(request)
        principal = await host_sessions.resolve(runtime, _tokens(request), token)
        if principal is not None:
            ids = principal.conversation_ids
            found = {
                "subject": principal.subject,
                "conversation_ids": None if ids is None else sorted(ids),
                "expires_at": principal.expires_at,
            }
            return Response(found, headers=API_HEADERS)
        book: TokenBook = request.app.state.tokens
        if runtime.settings.host_token_sign_in and book.accepts("host", token):
            ends = datetime.fromtimestamp(CLOCK.now(), UTC) + timedelta(seconds=HOST_TOKEN_SESSION_SECONDS)
            found = {
                "subject": SIGNED_IN_WITH_HOST_TOKEN,
                "conversation_ids": None,
                "expires_at": rfc3339(ends),
            }
            return Response(found, headers=API_HEADERS)
        raise unauthorized()

    @post("/host/sign-out", status_code=303, guards=[allowed_host])
    async def sign_out(self, request: Request[Any, Any, Any]) -> Response[Any]:
        """End the session server-side (its token stops working everywhere), then drop the cookie."""
        if not same_site(request):
            return _signin(None, "Sign out from this site's own page.", 403)
        signed_in = await _signed_in(request)
        if signed_in is not None and signed_in[1].session_id is not None:
            await host_sessions.revoke(runtime_of(request), signed_in[1].session_id)
            feeds: HostStreams = request.app.state.host_streams
            feeds.end_session(signed_in[1].session_id)
        cookie = cleared_cookie(secure=_secure(request))
        return Redirect("/host/", status_code=303, cookies=[cookie], headers={"Cache-Control": "no-store"})

    @get("/host/{name:str}", guards=[allowed_host])
    async def host_asset(self, name: FromPath[str], request: Request[Any, Any, Any]) -> Response[bytes]:
        return asset_response(request, catalogue(), f"host/{name}")

    @get("/apps/{app_scope:str}/")
    async def app_page(self, app_scope: FromPath[str], request: Request[Any, Any, Any]) -> Response[bytes]:
        page = surface(request, app_scope)["index.html"]
        # From configuration (PUBLIC_ORIGIN), never from the request's Host header.
        origin = runtime_of(request).settings.public_origin or ""
        return Response(page.body, media_type=HTML, headers=app_page_headers(origin))

    @get("/apps/{app_scope:str}/{name:str}")
    async def app_asset(
        self, app_scope: FromPath[str], name: FromPath[str], request: Request[Any, Any, Any]
    ) -> Response[bytes]:
        return asset_response(request, surface(request, app_scope), name)

    @get("/sdk/{name:str}")
    async def sdk(self, name: FromPath[str], request: Request[Any, Any, Any]) -> Response[bytes]:
        return asset_response(request, catalogue(), f"sdk/{name}")

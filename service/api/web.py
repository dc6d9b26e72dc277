"""The Web Reference Host's pages: sign-in, the host page, MiniApp pages, the SDK and their assets."""

from __future__ import annotations

from typing import Any

from litestar import Controller, Request, Response, get, post
from litestar.datastructures import Cookie
from litestar.params import FromPath
from litestar.response import Redirect

from service.api.auth import TokenBook
from service.api.host_session import COOKIE_NAME, HostSessions
from service.domain.errors import not_found
from web_host.assets import Asset, app_scopes, catalogue
from web_host.pages import (
    app_page_headers,
    asset_headers,
    host_page_headers,
    host_url,
    service_origin,
    signin_page,
    valid_conversation_id,
)

ASSET_SUFFIXES = (".js", ".css", ".svg", ".png")
HTML = "text/html"


def _sessions(request: Request[Any, Any, Any]) -> HostSessions:
    sessions: HostSessions = request.app.state.host_sessions
    return sessions


def _asset(request: Request[Any, Any, Any], name: str) -> Response[bytes]:
    asset: Asset | None = catalogue().get(name) if name.endswith(ASSET_SUFFIXES) else None
    if asset is None:
        raise not_found("file")
    if request.headers.get("if-none-match") == asset.etag:
        return Response(b"", status_code=304, headers=asset_headers(asset.etag))
    return Response(asset.body, media_type=asset.media_type, headers=asset_headers(asset.etag))


def _signin(conversation_id: str | None, error: str | None, status: int) -> Response[bytes]:
    return Response(
        signin_page(conversation_id, error),
        status_code=status,
        media_type=HTML,
        headers=host_page_headers(),
    )


class WebHostController(Controller):
    include_in_schema = False

    @get("/host/")
    async def host_page(self, request: Request[Any, Any, Any]) -> Response[bytes]:
        if not _sessions(request).valid(request.cookies.get(COOKIE_NAME)):
            conversation_id = valid_conversation_id(request.query_params.get("conversation_id"))
            return _signin(conversation_id, None, 200)
        page = catalogue()["host/index.html"]
        return Response(page.body, media_type=HTML, headers=host_page_headers())

    @post("/host/session", status_code=303)
    async def sign_in(self, request: Request[Any, Any, Any]) -> Response[Any]:
        form = await request.form()
        token, conversation_id = form.get("token"), valid_conversation_id(form.get("conversation_id"))
        book: TokenBook = request.app.state.tokens
        token = token.strip() if isinstance(token, str) else ""
        if not token or not book.accepts("host", token):
            return _signin(conversation_id, "That is not the host token.", 401)
        sessions = _sessions(request)
        cookie = Cookie(
            key=COOKIE_NAME,
            value=sessions.issue(token),
            max_age=sessions.lifetime_seconds,
            path="/",
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )
        headers = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"}
        return Redirect(host_url(conversation_id), status_code=303, cookies=[cookie], headers=headers)

    @post("/host/sign-out", status_code=303)
    async def sign_out(self) -> Response[Any]:
        cookie = Cookie(key=COOKIE_NAME, value="", max_age=0, path="/", httponly=True, samesite="strict")
        return Redirect("/host/", status_code=303, cookies=[cookie], headers={"Cache-Control": "no-store"})

    @get("/host/{name:str}")
    async def host_asset(self, name: FromPath[str], request: Request[Any, Any, Any]) -> Response[bytes]:
        return _asset(request, f"host/{name}")

    @get("/apps/{app_scope:str}/")
    async def app_page(self, app_scope: FromPath[str], request: Request[Any, Any, Any]) -> Response[bytes]:
        if app_scope not in app_scopes():
            raise not_found("app")
        page = catalogue()[f"apps/{app_scope}/index.html"]
        origin = service_origin(request.url.scheme, request.headers.get("host"))
        return Response(page.body, media_type=HTML, headers=app_page_headers(origin))

    @get("/apps/{app_scope:str}/{name:str}")
    async def app_asset(
        self, app_scope: FromPath[str], name: FromPath[str], request: Request[Any, Any, Any]
    ) -> Response[bytes]:
        return _asset(request, f"apps/{app_scope}/{name}")

    @get("/sdk/{name:str}")
    async def sdk(self, name: FromPath[str], request: Request[Any, Any, Any]) -> Response[bytes]:
        return _asset(request, f"sdk/{name}")

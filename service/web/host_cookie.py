"""The Web Host's session cookie: it carries a person's session token (``service.use_cases.
host_sessions``), under the rules a browser cookie needs.

``HttpOnly`` and ``SameSite=Strict`` always; ``Secure`` with the ``__Host-`` name prefix (no
``Domain``, ``Path=/``) unless ``COOKIE_SECURE=false`` for plain http on 127.0.0.1. Signing in and
out is refused cross-site (``Sec-Fetch-Site``, ``Origin``), and on the Host API the cookie counts
only for requests the host page itself can have made.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from litestar.connection import ASGIConnection
from litestar.datastructures import Cookie

PLAIN_COOKIE_NAME = "lineup_host_session"
SECURE_COOKIE_NAME = "__Host-lineup_host_session"
#: The documented name (the deployed default, COOKIE_SECURE on).
COOKIE_NAME = SECURE_COOKIE_NAME
#: The only paths where the session cookie stands in for a bearer token.
SESSION_PATH_PREFIX = "/v1/host/"
_UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_BROWSER_SITES = frozenset({"same-origin", "none"})


def cookie_name(secure: bool) -> str:
    return SECURE_COOKIE_NAME if secure else PLAIN_COOKIE_NAME


def session_cookie(value: str, max_age: int, *, secure: bool) -> Cookie:
    return Cookie(
        key=cookie_name(secure),
        value=value,
        max_age=max_age,
        path="/",
        httponly=True,
        samesite="strict",
        secure=secure,
    )


def cleared_cookie(*, secure: bool) -> Cookie:
    return session_cookie("", 0, secure=secure)


def same_site(connection: ASGIConnection[Any, Any, Any, Any]) -> bool:
    """The request comes from the service's own pages, or from no page at all (a typed URL).

    A browser's ``Sec-Fetch-Site``, when present, must say so; an ``Origin``, when present (and
    not ``null``, which a page under ``Referrer-Policy: no-referrer`` may send), must name the host
    the request was sent to. The scheme is not compared: behind a TLS-terminating proxy the service
    sees http where the browser says https.
    """
    site = connection.headers.get("sec-fetch-site")
    if site is not None and site not in _BROWSER_SITES:
        return False
    origin = connection.headers.get("origin")
    if origin is not None and origin != "null":
        netloc = urlsplit(origin).netloc if origin.startswith(("http://", "https://")) else ""
        if netloc.lower() != connection.headers.get("host", "").lower():
            return False
    return True


def cookie_session(connection: ASGIConnection[Any, Any, Any, Any], *, secure: bool) -> str | None:
    """The session token a Host API request carries in its cookie, if the host page itself can
    have made the request.

    Besides SameSite=Strict: an unsafe method must carry ``Content-Type: application/json`` (a
    cross-site form cannot, and a cross-site fetch with it needs a CORS preflight this service never
    grants), and the request must be same-site.
    """
    if not connection.url.path.startswith(SESSION_PATH_PREFIX):
        return None
    value = connection.cookies.get(cookie_name(secure))
    if not value or not same_site(connection):
        return None
    if connection.scope.get("method", "GET") in _UNSAFE_METHODS:
        media_type = connection.headers.get("content-type", "").partition(";")[0].strip().lower()
        if media_type != "application/json":
            return None
    return value

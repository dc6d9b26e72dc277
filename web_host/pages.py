"""Security headers of the Web Host's responses and the sign-in page.

The host page may frame only the service's own pages and talk only to the service; nothing may
frame it. A MiniApp page is always sandboxed (CSP ``sandbox allow-scripts``, so even opened on its
own it has an opaque origin), may be framed only by the host page, and may not connect anywhere:
it reaches the Runtime only through the host's Bridge.
"""

from __future__ import annotations

import html
from functools import cache
from string import Template
from urllib.parse import quote

from web_host.assets import STATIC_DIR

_COMMON = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
_PAGE = {**_COMMON, "Cache-Control": "no-store", "Vary": "Cookie"}
HOST_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
# A sandboxed document has an opaque origin; not every browser matches its 'self' against the
# URL it came from, so the service's origin (PUBLIC_ORIGIN, from configuration) is listed too.
_APP_CSP = Template(
    "default-src 'none'; script-src 'self' $origin; style-src 'self' $origin; "
    "img-src 'self' $origin data: blob:; connect-src 'none'; form-action 'none'; base-uri 'none'; "
    "frame-ancestors 'self' $origin; sandbox allow-scripts"
)


def host_page_headers() -> dict[str, str]:
    return {
        **_PAGE,
        "Content-Security-Policy": HOST_CSP,
        "X-Frame-Options": "DENY",
        "Cross-Origin-Opener-Policy": "same-origin",
    }


def app_page_headers(origin: str) -> dict[str, str]:
    csp = " ".join(_APP_CSP.substitute(origin=origin).split())
    return {**_PAGE, "Content-Security-Policy": csp.replace(" ;", ";")}


def host_url(conversation_id: str | None) -> str:
    if conversation_id is None:
        return "/host/"
    return "/host/?conversation_id=" + quote(conversation_id, safe="")


@cache
def _signin_template() -> Template:
    return Template((STATIC_DIR / "host" / "signin.html").read_text("utf-8"))


def signin_page(conversation_id: str | None, error: str | None) -> bytes:
    template = _signin_template()
    error_html = f'<p class="error" role="alert">{html.escape(error)}</p>' if error else ""
    return template.substitute(
        conversation_id=html.escape(conversation_id or "", quote=True), error=error_html
    ).encode("utf-8")

"""The operator console's pages (``/ops/``): its files, their security headers and the sign-in page.

The console is plain ES modules and CSS under ``static/``, like the Web Host: one page shell
for every view (the script draws the view the address names), talking only to ``/v1/ops/*`` of the
same origin. Nothing may frame it; it runs no inline script and loads nothing from elsewhere.
"""

from __future__ import annotations

import html
from pathlib import Path
from string import Template
from typing import TYPE_CHECKING

from service import assets
from service.assets import Asset

if TYPE_CHECKING:
    from service.manifests import Registry

STATIC_DIR = Path(__file__).resolve().parent / "static"

CONSOLE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
_COMMON = {"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"}
MAX_NEXT_LENGTH = 2000


def catalogue() -> dict[str, Asset]:
    """Every servable file of the console by its name under ``static/``."""
    return assets.catalogue(STATIC_DIR)


def page_headers() -> dict[str, str]:
    return {
        **_COMMON,
        "Cache-Control": "no-store",
        "Vary": "Cookie",
        "Content-Security-Policy": CONSOLE_CSP,
        "X-Frame-Options": "DENY",
        "Cross-Origin-Opener-Policy": "same-origin",
    }


def console_path(value: object) -> str:
    """Where to go after signing in: a path of the console itself, or the overview.

    Only ``/ops`` and paths below it, with no scheme, host, backslash or control character, so that
    the sign-in form can never send anyone elsewhere.
    """
    if not isinstance(value, str) or len(value) > MAX_NEXT_LENGTH or not value.isascii():
        return "/ops/"
    if not (value == "/ops" or value.startswith(("/ops/", "/ops?"))):
        return "/ops/"
    if "//" in value or "\\" in value or any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        return "/ops/"
    return value


def shell(registry: Registry) -> bytes:
    """The page shell, naming the Tools of the apps this service runs (the registry's) for the
    views' filters: the console lists no app of its own."""
    template = Template(catalogue()["index.html"].body.decode("utf-8"))
    return template.substitute(tools=html.escape(",".join(sorted(registry.tools)))).encode("utf-8")


def signin_page(next_path: str, error: str | None) -> bytes:
    template = Template(catalogue()["signin.html"].body.decode("utf-8"))
    error_html = f'<p class="error" role="alert">{html.escape(error)}</p>' if error else ""
    return template.substitute(
        next=html.escape(console_path(next_path), quote=True), error=error_html
    ).encode()

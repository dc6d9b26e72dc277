"""The Pomodoro surface as an MCP App (``io.modelcontextprotocol/ui``, specification 2026-01-26).

``ui://pomodoro/timer`` is one self-contained ``text/html;profile=mcp-app`` document, built from the
Web Host's own Pomodoro surface (its ``index.html``, ``pomodoro.css`` and ``pomodoro.js``, read
through ``surface_file``) with the CSS and JS inline and, in place of the Web Host's SDK
(``/sdk/lineup-sdk.js``), ``mcp_apps_sdk.js``: the same ``window.lineup`` API spoken as MCP Apps
JSON-RPC over ``postMessage`` to the host, whose ``tools/call`` reaches this server's app-only tools
(``service.mcp.app_tools``). So the two surfaces cannot drift: there is one timer.

The document is built once per process from files in the release, with nothing variable in it (no
time, no random), so every replica serves the same bytes. It loads nothing and connects nowhere: its
``_meta.ui.csp`` declares no domain at all, and the host's sandbox enforces that.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp.server.apps import APP_MIME_TYPE, EXTENSION_ID
from mcp.shared.exceptions import MCPError

from service.apps import APPS_DIR, SURFACE

#: JSON-RPC error of an unknown resource URI (MCP, resources/read).
RESOURCE_NOT_FOUND = -32002

__all__ = ["APP_MIME_TYPE", "EXTENSION_ID", "POMODORO_URI", "list_resources", "read_resource"]

POMODORO_URI = "ui://pomodoro/timer"
#: The tool whose call the View renders beside (service/apps/pomodoro/).
POMODORO_START = "pomodoro.start"
#: The tools whose calls a host shows with an MCP App: the View of the operation the call opens.
TOOL_VIEWS = {POMODORO_START: POMODORO_URI}
#: Where the Pomodoro's surface lives (its app folder): the one place the MCP App reads it from.
POMODORO_SURFACE_DIR = APPS_DIR / "pomodoro" / SURFACE
#: The MCP Apps side of ``window.lineup`` (replaces the Web Host's SDK in the MCP App).
MCP_APPS_SDK = Path(__file__).resolve().parent / "mcp_apps_sdk.js"

#: No domain of any kind: the View loads nothing, connects nowhere, frames nothing.
CSP: dict[str, list[str]] = {
    "connectDomains": [],
    "resourceDomains": [],
    "frameDomains": [],
    "baseUriDomains": [],
}
UI_META: dict[str, Any] = {"ui": {"csp": CSP, "prefersBorder": True}}

_STYLESHEET = re.compile(r'<link rel="stylesheet" href="[^"]*/pomodoro\.css">\n?')
_SDK = re.compile(r'<script src="/sdk/lineup-sdk\.js" defer></script>\n?')
_APP = re.compile(r'<script src="[^"]*/pomodoro\.js" defer></script>\n?')


def surface_file(name: str) -> str:
    """A file of the Web Host's Pomodoro surface (``index.html``, ``pomodoro.css``, ``pomodoro.js``)."""
    return (POMODORO_SURFACE_DIR / name).read_text(encoding="utf-8")


def _script(source: str) -> str:
    if "</script" in source.lower():
        raise ValueError("an inline script may not contain </script")
    return f"<script>\n{source}</script>\n"


def _cut(pattern: re.Pattern[str], page: str) -> str:
    page, count = pattern.subn("", page)
    if count != 1:
        raise ValueError(f"the Pomodoro surface's index.html no longer has {pattern.pattern!r}")
    return page


@functools.cache
def pomodoro_document() -> str:
    """The MCP App's HTML: the surface's page with its stylesheet inline in the head and the two
    scripts (the MCP Apps SDK, then the app) inline at the end of the body, in the page's order."""
    page = surface_file("index.html")
    for pattern in (_STYLESHEET, _SDK, _APP):
        page = _cut(pattern, page)
    style = f"<style>\n{surface_file('pomodoro.css')}</style>\n"
    scripts = _script(MCP_APPS_SDK.read_text(encoding="utf-8")) + _script(surface_file("pomodoro.js"))
    if page.count("</head>") != 1 or page.count("</body>") != 1:
        raise ValueError("the Pomodoro surface's index.html needs one </head> and one </body>")
    return page.replace("</head>", style + "</head>").replace("</body>", scripts + "</body>")


def list_resources() -> types.ListResourcesResult:
    return types.ListResourcesResult(
        resources=[
            types.Resource(
                uri=POMODORO_URI,
                name="pomodoro-timer",
                title="Pomodoro timer",
                description="The focus timer of a pomodoro.start call: its activity, the countdown to "
                "its ends_at, and how it ended once the Runtime has ended it.",
                mime_type=APP_MIME_TYPE,
                meta=UI_META,
            )
        ]
    )


def read_resource(uri: str) -> types.ReadResourceResult:
    if uri != POMODORO_URI:
        raise MCPError(RESOURCE_NOT_FOUND, f"Unknown resource: {uri}", data={"uri": uri})
    contents = types.TextResourceContents(
        uri=POMODORO_URI, mime_type=APP_MIME_TYPE, text=pomodoro_document(), meta=UI_META
    )
    return types.ReadResourceResult(contents=[contents])

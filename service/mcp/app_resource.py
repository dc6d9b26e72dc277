"""The MCP Apps (``io.modelcontextprotocol/ui``, specification 2026-01-26) the apps declare.

A ``workspace`` app may declare, in its manifest's ``surface.mcp_app``, that its page is also an MCP
App: its ``ui://`` URI, its name, title and description, and the Tool whose calls a host renders it
beside (``service.app_manifest.McpApp``). The MCP face serves whatever the registry's apps declare,
and names none of them.

Each is one self-contained ``text/html;profile=mcp-app`` document, built from the Web Host's own
page of the app (its ``surface/index.html`` and the stylesheets and scripts of its folder it loads)
with those inline and, in place of the Web Host's SDK (``/sdk/lineup-sdk.js``),
``mcp_apps_sdk.js``: the same ``window.lineup`` API spoken as MCP Apps JSON-RPC over ``postMessage``
to the host, whose ``tools/call`` reaches the View's app-only tools (``service.mcp.app_tools``),
named after the app. So the two surfaces cannot drift: there is one page.

An app may also serve files of its folder as resources (its manifest's ``resources``: any absolute
URI but ``ui://``, unique among every app's): read once per process, text for a text type, base64
otherwise (``app_resources``, ``file_contents``). They are the same for every caller, as the views
are: nothing in them is a person's or a conversation's.

A document is built once per process from files in the release, with nothing variable in it (no
time, no random), so every replica serves the same bytes. It loads nothing and connects nowhere:
its ``_meta.ui.csp`` declares no domain at all, and the host's sandbox enforces that.
"""

from __future__ import annotations

import base64
import functools
import re
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp.server.apps import APP_MIME_TYPE, EXTENSION_ID
from mcp.shared.exceptions import MCPError

from service.app_manifest import AppManifest, AppResource
from service.manifests import Registry

#: JSON-RPC error of an unknown resource URI (MCP, resources/read).
RESOURCE_NOT_FOUND = -32002

__all__ = [
    "APP_MIME_TYPE",
    "EXTENSION_ID",
    "app_resources",
    "document",
    "list_resources",
    "read_resource",
    "tool_views",
]

#: The MCP Apps side of ``window.lineup`` (replaces the Web Host's SDK in the MCP App); its
#: ``APP_SCOPE`` placeholder becomes the app's scope, which names the View's app-only tools.
MCP_APPS_SDK = Path(__file__).resolve().parent / "mcp_apps_sdk.js"
APP_SCOPE = "__APP_SCOPE__"

#: No domain of any kind: the View loads nothing, connects nowhere, frames nothing.
CSP: dict[str, list[str]] = {
    "connectDomains": [],
    "resourceDomains": [],
    "frameDomains": [],
    "baseUriDomains": [],
}
UI_META: dict[str, Any] = {"ui": {"csp": CSP, "prefersBorder": True}}

_STYLESHEET = re.compile(r'<link rel="stylesheet" href="(?P<href>[^"]*)">\n?')
_SCRIPT = re.compile(r'<script src="(?P<src>[^"]*)" defer></script>\n?')
_SDK = "/sdk/lineup-sdk.js"


def apps_with_views(registry: Registry) -> list[AppManifest]:
    """The registry's apps that declare an MCP App, in scope order."""
    return [app for _, app in sorted(registry.apps.items()) if app.mcp_app is not None]


def tool_views(registry: Registry) -> dict[str, str]:
    """Each Tool whose calls a host shows with an MCP App -> that App's ``ui://`` URI."""
    return {app.mcp_app.tool: app.mcp_app.uri for app in apps_with_views(registry) if app.mcp_app is not None}


def surface_file(surface: Path, name: str) -> str:
    """A file of an app's page (its ``surface/``), by its name there."""
    return (surface / name).read_text(encoding="utf-8")


def _script(source: str) -> str:
    if "</script" in source.lower():
        raise ValueError("an inline script may not contain </script")
    return f"<script>\n{source}</script>\n"


def _own(scope: str, surface: Path, href: str) -> str:
    """The name of the app's own file that ``href`` loads (its page's address, or relative)."""
    name = href.rsplit("/", 1)[-1]
    if not name or not (surface / name).is_file():
        raise ValueError(f"{scope}'s index.html loads {href!r}, which is not a file of its surface/")
    return name


@functools.cache
def build(scope: str, surface: Path) -> str:
    """The MCP App's HTML of the app ``scope`` whose page is in ``surface``: the page with its
    stylesheets inline in the head and its scripts (the MCP Apps SDK first, then the app's own, in
    the page's order) inline at the end of the body."""
    page = surface_file(surface, "index.html")
    styles = [_own(scope, surface, match["href"]) for match in _STYLESHEET.finditer(page)]
    sources = [match["src"] for match in _SCRIPT.finditer(page)]
    if sources.count(_SDK) != 1:
        raise ValueError(f"{scope}'s index.html does not load {_SDK} once")
    scripts = [_own(scope, surface, src) for src in sources if src != _SDK]
    page = _SCRIPT.sub("", _STYLESHEET.sub("", page))
    if page.count("</head>") != 1 or page.count("</body>") != 1:
        raise ValueError(f"{scope}'s index.html needs one </head> and one </body>")
    style = "".join(f"<style>\n{surface_file(surface, name)}</style>\n" for name in styles)
    sdk = MCP_APPS_SDK.read_text(encoding="utf-8").replace(APP_SCOPE, scope)
    inline = _script(sdk) + "".join(_script(surface_file(surface, name)) for name in scripts)
    return page.replace("</head>", style + "</head>").replace("</body>", inline + "</body>")


def document(app: AppManifest) -> str:
    """The MCP App's HTML of ``app`` (``build``)."""
    assert app.surface is not None  # a workspace app's: the manifest's check
    return build(app.app_scope, app.surface)


def app_resources(registry: Registry) -> dict[str, AppResource]:
    """Every file an app serves as a resource (its manifest's ``resources``), by URI, in scope order."""
    return {resource.uri: resource for _, app in sorted(registry.apps.items()) for resource in app.resources}


@functools.cache
def file_contents(resource: AppResource) -> types.TextResourceContents | types.BlobResourceContents:
    """An app resource's contents, read once per process from the release (its size and, for a text
    type, its UTF-8 were checked when the manifest was loaded): text, or base64 for any other type."""
    data = resource.path.read_bytes()
    if resource.is_text:
        return types.TextResourceContents(uri=resource.uri, mime_type=resource.mime_type, text=data.decode())
    encoded = base64.b64encode(data).decode("ascii")
    return types.BlobResourceContents(uri=resource.uri, mime_type=resource.mime_type, blob=encoded)


def list_resources(registry: Registry) -> types.ListResourcesResult:
    """The MCP Apps' views, then the files the apps serve (each app's in its manifest's order)."""
    views = [
        types.Resource(
            uri=app.mcp_app.uri,
            name=app.mcp_app.name,
            title=app.mcp_app.title,
            description=app.mcp_app.description,
            mime_type=APP_MIME_TYPE,
            meta=UI_META,
        )
        for app in apps_with_views(registry)
        if app.mcp_app is not None
    ]
    files = [
        types.Resource(
            uri=resource.uri,
            name=resource.name,
            title=resource.title,
            description=resource.description,
            mime_type=resource.mime_type,
            size=resource.path.stat().st_size,
        )
        for resource in app_resources(registry).values()
    ]
    return types.ListResourcesResult(resources=views + files)


def read_resource(registry: Registry, uri: str) -> types.ReadResourceResult:
    served = app_resources(registry).get(uri)
    if served is not None:
        return types.ReadResourceResult(contents=[file_contents(served)])
    app = next((app for app in apps_with_views(registry) if app.mcp_app and app.mcp_app.uri == uri), None)
    if app is None:
        raise MCPError(RESOURCE_NOT_FOUND, f"Unknown resource: {uri}", data={"uri": uri})
    contents = types.TextResourceContents(uri=uri, mime_type=APP_MIME_TYPE, text=document(app), meta=UI_META)
    return types.ReadResourceResult(contents=[contents])

"""How Litestar documents the API: security schemes, tags, and where its defaults are not ours.

Everything else in the document comes from the handlers themselves: their body models
(``service.api.bodies``), their answer types and declared refusals (``service.api.answers``), and
their parameters (``service.api.inputs``) — and, for ``POST /v1/tool-calls``, from the registry the
app runs with (``service.api.tools.agent_tool_controller``), so a service publishes exactly the
Tools it runs.

The answers of ``POST /v1/tool-calls`` are told apart by Tool (``compose_tool_answers``): an answer
body carries no ``tool`` to discriminate on (and the wire stays as it is), so the request's ``tool``
selects it. The request body is a ``oneOf`` of one ``ToolCall.<tool>`` per Tool, discriminated by
its ``tool`` (a ``const``: the branches never overlap); each Tool's answers with a status are one
component of its own, ``<tool>.<status>`` (a ``oneOf`` of its answer types, which its ``status``
word tells apart); ``x-answers-by-tool`` maps each Tool to them. The status's schema lists the
Tools' components under ``anyOf`` — any one of them may be the answer, and two apps whose answers
look alike never make a valid answer fail as a ``oneOf`` would (docs/architecture.md).
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
from litestar import Litestar, Response, Router, get
from litestar._openapi.plugin import OpenAPIPlugin
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import (
    JsonRenderPlugin,
    OpenAPIRenderPlugin,
    SwaggerRenderPlugin,
    YamlRenderPlugin,
)
from litestar.openapi.spec import Components, OpenAPI, Operation, SecurityScheme
from litestar.params import FromPath
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from service.domain.errors import NotFound
from service.http import API_HEADERS
from service.version import __version__
from service.web.console_cookie import SECURE_COOKIE_NAME as CONSOLE_COOKIE_NAME
from service.web.host_cookie import COOKIE_NAME

if TYPE_CHECKING:
    from service.manifests import Registry

SECURITY_SCHEMES = {
    "agent": SecurityScheme(type="http", scheme="bearer", description="AGENT_TOKEN: the Agent Tool API."),
    "host": SecurityScheme(type="http", scheme="bearer", description="HOST_TOKEN: the Host API."),
    "hostSession": SecurityScheme(
        type="apiKey",
        name=COOKIE_NAME,
        security_scheme_in="cookie",
        description="The Web Host page's session cookie, in place of HOST_TOKEN on /v1/host/ "
        "(unsafe methods also need Content-Type: application/json).",
    ),
    "operator": SecurityScheme(type="http", scheme="bearer", description="OPERATOR_TOKEN: the ops API."),
    "metrics": SecurityScheme(
        type="http", scheme="bearer", description="METRICS_TOKEN (or OPERATOR_TOKEN): GET /metrics."
    ),
    "operatorSession": SecurityScheme(
        type="apiKey",
        name=CONSOLE_COOKIE_NAME,
        security_scheme_in="cookie",
        description="The operator console's session cookie, in place of OPERATOR_TOKEN on /v1/ops/ "
        "(unsafe methods also need Sec-Fetch-Site: same-origin and Content-Type: application/json).",
    ),
    "capability": SecurityScheme(
        type="http",
        scheme="bearer",
        description="An instance capability (POST /v1/host/instances/{instance_id}/capability): the SDK API.",
    ),
}

# Litestar documents a 400 "Validation Exception" for every route with a parameter. This service
# never answers one: parameters are checked by service.api.inputs, bodies by
# service.api.bodies.ContractRequest, each with the contract's error body.
_LITESTAR_VALIDATION = "Bad request syntax or unsupported method"


_NOT_FOUND = msgspec.json.encode({"error": "not_found", "message": "no such page"})

# The interactive page, where API_DOCS_UI turns it on, loads only files this service serves.
UI_ASSETS = ("swagger-ui-bundle.js", "swagger-ui.css", "swagger-ui-standalone-preset.js")
UI_CSP = (
    "default-src 'none'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)


def openapi_config(*, ui: bool = False) -> OpenAPIConfig:
    """The document at /schema/openapi.json (and .yaml); with ``ui``, also the Swagger UI page at
    /schema/swagger, its scripts self-hosted (``GET /schema/ui/{file}``) under a CSP."""
    plugins: list[OpenAPIRenderPlugin] = [JsonRenderPlugin(), YamlRenderPlugin()]
    if ui:
        plugins.append(
            SwaggerRenderPlugin(
                js_url="/schema/ui/swagger-ui-bundle.js",
                css_url="/schema/ui/swagger-ui.css",
                standalone_preset_js_url="/schema/ui/swagger-ui-standalone-preset.js",
                favicon="",  # Litestar's default comes from a CDN
            )
        )
    return OpenAPIConfig(
        title="Lineup Runtime",
        version=__version__,
        # The pages' router carries their middleware, so no other request passes through it.
        openapi_router=Router(
            "/schema",
            route_handlers=[],
            include_in_schema=False,
            dto=None,
            return_dto=None,
            middleware=[partial(schema_pages, ui=ui)],
        ),
        components=Components(security_schemes=dict(SECURITY_SCHEMES)),
        create_examples=False,
        render_plugins=plugins,
    )


@get("/schema/ui/{name:str}", include_in_schema=False)
async def ui_asset(name: FromPath[str]) -> Response[bytes]:
    """A Swagger UI file from the installed ``swagger-ui-bundle`` package."""
    if name not in UI_ASSETS:
        raise NotFound.of("file")
    import swagger_ui_bundle  # type: ignore[import-untyped]  # only where API_DOCS_UI is on

    body = (Path(swagger_ui_bundle.swagger_ui_path) / name).read_bytes()
    media_type = "text/css" if name.endswith(".css") else "text/javascript"
    return Response(body, media_type=media_type, headers={"Cache-Control": "public, max-age=3600"})


# The document is the same for every app create_app builds in a process with one registry (it comes
# from the handlers and the registry, not from the settings): built once, it is shared. Building it
# costs ~0.3 s, which every app of the test suite (hundreds) would otherwise pay again. It is built
# when first asked for (a /schema page, ``app.openapi_schema``), not before serve's port opens: most
# processes never ask.
_DOCUMENTS: dict[int, tuple[Registry, OpenAPI, dict[str, Any]]] = {}

TOOL_CALLS = "/v1/tool-calls"
BY_TOOL = "x-answers-by-tool"


class _ContractOpenAPIPlugin(OpenAPIPlugin):
    """Litestar's OpenAPI plugin whose document, built on first use, is without Litestar's default
    400 answers, tells the tool calls' answers apart by Tool, and is shared by the process's apps
    of one registry (``app.state.registry``)."""

    __slots__ = ()

    def _document(self) -> tuple[Registry, OpenAPI, dict[str, Any]]:
        registry: Registry = self.app.state.registry
        found = _DOCUMENTS.get(id(registry))
        if found is None or found[0] is not registry:
            document = _drop_validation_answers(super().provide_openapi())
            found = (registry, document, compose_tool_answers(document.to_schema(), registry))
            _DOCUMENTS[id(registry)] = found
        return found

    def provide_openapi(self) -> OpenAPI:
        if not self._openapi:
            self._openapi = self._document()[1]
        return self._openapi

    def provide_openapi_schema(self) -> dict[str, Any]:
        if not self._openapi_schema:
            self._openapi_schema = self._document()[2]
        return self._openapi_schema


def served_document(app: Litestar) -> dict[str, Any]:
    """The document ``app`` serves at /schema/openapi.json (its tool calls' answers told apart by
    Tool: ``app.openapi_schema`` is Litestar's, before that)."""
    return app.plugins.get(OpenAPIPlugin).provide_openapi_schema()


def compose_tool_answers(schema: dict[str, Any], registry: Registry) -> dict[str, Any]:
    """The document with ``POST /v1/tool-calls`` told apart by Tool (see the module's doc)."""
    from service.api.tools import answer_types, typed_answers

    operation = schema.get("paths", {}).get(TOOL_CALLS, {}).get("post")
    if operation is None:
        return schema
    components: dict[str, Any] = schema["components"]["schemas"]
    by_tool: dict[str, dict[str, str]] = {name: {} for name in sorted(registry.runners)}
    for status, response in operation["responses"].items():
        if not status.isdigit() or status.startswith("4"):
            continue
        content = response["content"]["application/json"]
        union = content["schema"]
        refs = [each["$ref"] for each in union["oneOf"]] if "oneOf" in union else [union["$ref"]]
        types = answer_types(registry, int(status))
        if len(refs) != len(types):  # pragma: no cover - Litestar documents a union member by member
            raise RuntimeError(f"{TOOL_CALLS} {status}: {len(types)} answer types, {len(refs)} documented")
        ref_of = {id(typed): ref for typed, ref in zip(types, refs, strict=True)}
        for tool, typed in typed_answers(registry, int(status)).items():
            own = [{"$ref": ref_of[id(each)]} for each in typed]
            name = f"{tool}.{status}"
            components[name] = {
                **(own[0] if len(own) == 1 else {"oneOf": own}),
                "description": f"The answers of {tool} with {status}.",
            }
            by_tool[tool][status] = f"#/components/schemas/{name}"
        content["schema"] = {
            "anyOf": [{"$ref": by_tool[tool][status]} for tool in by_tool if status in by_tool[tool]]
        }
    operation[BY_TOOL] = by_tool
    body = operation["requestBody"]["content"]["application/json"]
    generic = components[body["schema"]["$ref"].rsplit("/", 1)[-1]]
    mapping: dict[str, str] = {}
    for tool in sorted(registry.tools):
        name = f"ToolCall.{tool}"
        components[name] = {
            **generic,
            "properties": {**generic["properties"], "tool": {"const": tool, "type": "string"}},
            "title": name,
            "description": f"A call of {tool}: its arguments follow its input_schema (GET /v1/tools).",
        }
        mapping[tool] = f"#/components/schemas/{name}"
    body["schema"] = {
        "oneOf": [{"$ref": ref} for ref in mapping.values()],
        "discriminator": {"propertyName": "tool", "mapping": mapping},
    }
    return schema


def without_litestar_validation_answers(app: Litestar) -> None:
    """Drop the 400 Litestar documents by default on every operation that has parameters (when the
    document is built: on first use)."""
    # Same slots as its base: the plugin Litestar made becomes one that post-processes its document.
    app.plugins.get(OpenAPIPlugin).__class__ = _ContractOpenAPIPlugin


def _drop_validation_answers(document: OpenAPI) -> OpenAPI:
    for item in (document.paths or {}).values():
        for method in ("get", "put", "post", "delete", "patch"):
            operation: Operation | None = getattr(item, method)
            responses = operation.responses if operation is not None else None
            default = (responses or {}).get("400")
            if responses is not None and getattr(default, "description", None) == _LITESTAR_VALIDATION:
                del responses["400"]
    return document


def schema_pages(app: ASGIApp, *, ui: bool) -> ASGIApp:
    """ASGI middleware for ``/schema/…``: a page that is not served (Litestar answers its own HTML)
    is the contract's ``404 not_found``; with ``ui``, the interactive page gets its
    Content-Security-Policy."""

    async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
        path = scope["path"]
        if not path.startswith("/schema"):
            await app(scope, receive, send)
            return
        replaced = False

        async def send_as_contract(message: Message) -> None:
            nonlocal replaced
            if message["type"] == "http.response.start":
                headers = [
                    h for h in message.get("headers", []) if h[0].lower() != b"content-security-policy"
                ]
                if ui and path.startswith("/schema/swagger"):
                    headers.append((b"content-security-policy", UI_CSP.encode()))
                if message["status"] == 404:
                    replaced = True
                    headers = [
                        (b"content-type", b"application/json"),
                        (b"content-length", str(len(_NOT_FOUND)).encode()),
                        *((k.encode(), v.encode()) for k, v in API_HEADERS.items()),
                    ]
                message = {**message, "headers": headers}
            elif message["type"] == "http.response.body" and replaced:
                if message.get("more_body", False):
                    return
                message = {"type": "http.response.body", "body": _NOT_FOUND, "more_body": False}
            await send(message)

        await app(scope, receive, send_as_contract)

    return middleware

"""The HTTP server span of every request (REST, MCP, the console), when this process traces.

The span is OpenTelemetry's own ASGI instrumentation (``opentelemetry-instrumentation-asgi``),
mounted as Litestar's ``OpenTelemetryInstrumentationMiddleware`` on the application: it reads the
caller's ``traceparent``/``tracestate`` through the global propagator, names the span and sets its
attributes after the HTTP semantic conventions (``http.request.method``, ``url.path``,
``url.scheme``, ``http.route``, ``http.response.status_code``, ``server.address``,
``client.address``, ``user_agent.original``, ``network.protocol.version``; ``error.type`` for a
5xx), and ends it with the answer. What we add: the span's name and ``http.route`` from the
route's template once Litestar routed the request (``POST /v1/tool-calls``,
``GET /v1/ops/tool-calls/{tool_call_id}``; Litestar's default would put the request's own path
there), no ``send``/``receive`` child spans, and the span's context kept in the ASGI scope, where
the MCP face links its span to it.

Nothing of it is installed when the process does not trace (``service.telemetry.TRACING``): the
middleware costs about a fifth of a tool call's Python even when its spans record nothing. With
traces on, the stable HTTP conventions are asked for (``OTEL_SEMCONV_STABILITY_OPT_IN=http``)
unless the operator set that variable. The probes (``/healthz``, ``/readyz``, ``/metrics``) are not
traced; ``OTEL_PYTHON_EXCLUDED_URLS`` (or ``OTEL_PYTHON_LITESTAR_EXCLUDED_URLS``) leaves out more.
"""

from __future__ import annotations

import os
from typing import Any

from litestar.enums import ScopeType
from litestar.types import ASGIApp, Middleware, Receive, Scope, Send
from opentelemetry import trace
from opentelemetry.trace import Span, SpanContext

from service.telemetry import TRACING

#: Where the HTTP server span's context rides the ASGI scope (``service.mcp`` links to it).
HTTP_SPAN = "io.lineup.http_span"

#: The probes, scraped every few seconds: not traced.
UNTRACED = ["^/healthz$", "^/readyz$", "^/metrics$"]

_STABILITY = "OTEL_SEMCONV_STABILITY_OPT_IN"


def route_details(scope: Scope) -> tuple[str, dict[str, Any]]:
    """The span's name when it starts: the method alone (the conventions' name while the route is
    unknown: Litestar runs this middleware before routing, so that a refused route is traced too;
    ``name_by_route`` names it once routed). Never the request's own path (unbounded)."""
    return str(scope.get("method") or "HTTP"), {}


def name_by_route(app: ASGIApp) -> ASGIApp:
    """Once Litestar routed the request: the HTTP span named ``{method} {route}`` with ``http.route``,
    the route's template (``/v1/ops/tool-calls/{tool_call_id}``; a mount's path, ``/mcp``)."""

    async def named(scope: Scope, receive: Receive, send: Send) -> None:
        span = trace.get_current_span()
        if span.is_recording():
            route = scope.get("path_template") or _mount_path(scope)
            if route:
                span.update_name(f"{scope.get('method') or 'HTTP'} {route}")
                span.set_attribute("http.route", route)
        await app(scope, receive, send)

    return named


def _mount_path(scope: Scope) -> str | None:
    handler = scope.get("route_handler")
    paths = getattr(handler, "paths", None) if getattr(handler, "is_mount", False) else None
    return next(iter(paths)) if paths and len(paths) == 1 else None


def _keep_span(span: Span, scope: dict[str, Any]) -> None:
    scope[HTTP_SPAN] = span.get_span_context()


def http_span_of(scope: Any) -> SpanContext | None:
    """The HTTP server span's context of the request whose scope this is (None: not traced)."""
    found = scope.get(HTTP_SPAN) if isinstance(scope, dict) else None
    return found if isinstance(found, SpanContext) else None


def http_middleware() -> list[Middleware]:
    """The application's middleware for HTTP server spans: none when this process does not trace."""
    if not TRACING.on:
        return []
    os.environ.setdefault(_STABILITY, "http")  # read once, by the instrumentation below
    from litestar.plugins.opentelemetry import OpenTelemetryConfig

    config = OpenTelemetryConfig(
        scope_span_details_extractor=route_details,
        server_request_hook_handler=_keep_span,
        exclude=UNTRACED,
        exclude_spans=["receive", "send"],
        scopes={ScopeType.HTTP},
    )
    # Litestar runs its OpenTelemetry middleware first of all, before routing; name_by_route runs
    # in each route's own stack, after it.
    return [config.middleware, name_by_route]

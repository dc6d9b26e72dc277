"""The HTTP server span of every request (REST, MCP, the console), when this process traces.

The span is OpenTelemetry's own ASGI instrumentation (``opentelemetry-instrumentation-asgi``),
mounted as Litestar's ``OpenTelemetryInstrumentationMiddleware`` on the application: it reads the
caller's ``traceparent``/``tracestate`` through the global propagator, names the span and sets its
attributes after the HTTP semantic conventions (``http.request.method``, ``url.path``,
``url.scheme``, ``http.route``, ``http.response.status_code``, ``server.address``,
``client.address``, ``user_agent.original``, ``network.protocol.version``; ``error.type`` for a
5xx), and ends it with the answer. What we add: the span's name and ``http.route`` from the
route's template (``POST /v1/tool-calls``, ``GET /v1/ops/tool-calls/{tool_call_id:path}``; the
Litestar default would put the request's own path there), no ``send``/``receive`` child spans, and
the span's context kept in the ASGI scope, where the MCP face links its span to it.

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
from litestar.middleware.base import DefineMiddleware
from litestar.types import Scope
from opentelemetry.trace import Span, SpanContext

from service.telemetry import TRACING

#: Where the HTTP server span's context rides the ASGI scope (``service.mcp`` links to it).
HTTP_SPAN = "io.lineup.http_span"

#: The probes, scraped every few seconds: not traced.
UNTRACED = ["^/healthz$", "^/readyz$", "^/metrics$"]

_STABILITY = "OTEL_SEMCONV_STABILITY_OPT_IN"


def route_details(scope: Scope) -> tuple[str, dict[str, Any]]:
    """The span's name and ``http.route``: the route's template (Litestar routed the request
    before its middleware runs), never the request's own path (unbounded)."""
    route = scope.get("path_template") or scope.get("path", "")
    method = scope.get("method")
    name = f"{method} {route}" if method else str(route)
    return name, {"http.route": route}


def _keep_span(span: Span, scope: dict[str, Any]) -> None:
    scope[HTTP_SPAN] = span.get_span_context()


def http_span_of(scope: Any) -> SpanContext | None:
    """The HTTP server span's context of the request whose scope this is (None: not traced)."""
    found = scope.get(HTTP_SPAN) if isinstance(scope, dict) else None
    return found if isinstance(found, SpanContext) else None


def http_middleware() -> list[DefineMiddleware]:
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
    return [config.middleware]

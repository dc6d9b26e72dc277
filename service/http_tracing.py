"""The HTTP server span of every request (REST, MCP, the console), when this process traces.

``HttpSpans`` wraps the whole application — Litestar's exception handling included, so a refusal
any layer raised is in the span with the status it left with — as Litestar places its own
OpenTelemetry middleware. It reads the caller's ``traceparent``/``tracestate`` (and ``baggage``)
through the global propagator and follows the HTTP semantic conventions (stable): a SERVER span
named ``{method} {route}``, with ``http.request.method``, ``url.path``, ``url.scheme`` from the
start; once it records, ``url.query``, ``server.address``/``server.port``, ``client.address``/
``client.port``, ``user_agent.original``, ``network.protocol.version``; ``http.route`` (the route's
template: ``/v1/tool-calls``, ``/v1/ops/tool-calls/{tool_call_id}``, a mount's path ``/mcp``) once
Litestar routed the request (``name_by_route``); ``http.response.status_code``, and ``error.type``
with an error status for a 5xx or an exception. A request no route takes keeps the method alone
as its name. The span's context rides the ASGI scope (``HTTP_SPAN``), where the MCP face links its
own span to it.

Why not OpenTelemetry's ASGI instrumentation (``opentelemetry-instrumentation-asgi``, what
Litestar's ``OpenTelemetryPlugin`` mounts): it was measured on the tool call's path
(``bench.call_instructions --tracing``, docs/tracing.md) and costs about as much as the whole
untraced call even for a request its sampler drops — it reads every header several times, parses
the URL, builds duration histograms and the old and new attribute sets — which makes a low
sampling ratio nearly as dear as tracing everything. This one does, per request not sampled, one
pass over the headers and the sampler's decision.

Nothing of it is installed when the process does not trace (``service.telemetry.TRACING``). The
probes (``/healthz``, ``/readyz``, ``/metrics``), scraped every few seconds, are not traced.
"""

from __future__ import annotations

from typing import Any

from litestar.enums import ScopeType
from litestar.types import ASGIApp, Message, Middleware, Receive, Scope, Send
from opentelemetry import context, propagate, trace
from opentelemetry.trace import Span, SpanContext, SpanKind, StatusCode

from service.telemetry import TRACING, tracer

#: Where the HTTP server span's context rides the ASGI scope (``service.mcp`` links to it).
HTTP_SPAN = "io.lineup.http_span"

#: The probes, scraped every few seconds: not traced.
UNTRACED = frozenset({"/healthz", "/readyz", "/metrics"})

#: The headers the W3C propagators read (ASGI gives names in lowercase).
_PROPAGATED = frozenset({b"traceparent", b"tracestate", b"baggage"})
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"})


class HttpSpans:
    """The ASGI application ``app`` with an HTTP server span around each request."""

    __slots__ = ("app",)

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP or scope["path"] in UNTRACED:
            await self.app(scope, receive, send)
            return
        carrier: dict[str, str] | None = None
        for name, value in scope["headers"]:
            if name in _PROPAGATED:
                if carrier is None:
                    carrier = {}
                carrier[name.decode("latin-1")] = value.decode("latin-1")
        parent = propagate.extract(carrier) if carrier is not None else None
        method: str = scope["method"]
        known = method in _METHODS
        attributes = {
            "http.request.method": method if known else "_OTHER",
            "url.path": scope["path"],
            "url.scheme": scope.get("scheme", "http"),
        }
        span = tracer().start_span(method if known else "HTTP", parent, SpanKind.SERVER, attributes)
        if span.is_recording():
            _describe(span, scope, method, known)
        scope[HTTP_SPAN] = span.get_span_context()  # type: ignore[literal-required]
        token = context.attach(trace.set_span_in_context(span))
        status = 0

        async def send_answer(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_answer)
        except BaseException as exc:
            if span.is_recording():
                span.set_attribute("error.type", type(exc).__qualname__)
                span.set_status(StatusCode.ERROR)
            raise
        finally:
            if status and span.is_recording():
                span.set_attribute("http.response.status_code", status)
                if status >= 500:
                    span.set_attribute("error.type", str(status))
                    span.set_status(StatusCode.ERROR)
            span.end()
            context.detach(token)


def _describe(span: Span, scope: Scope, method: str, known: bool) -> None:
    """What a recorded span carries besides what its sampler saw."""
    described: dict[str, Any] = {"network.protocol.version": scope.get("http_version", "1.1")}
    if not known:
        described["http.request.method_original"] = method
    if query := scope.get("query_string"):
        described["url.query"] = query.decode("latin-1")
    for name, value in scope["headers"]:
        if name == b"host":
            host, _, port = value.decode("latin-1").rpartition(":")
            if not host or not port.isdigit():
                host, port = value.decode("latin-1"), ""
            described["server.address"] = host
            if port:
                described["server.port"] = int(port)
        elif name == b"user-agent":
            described["user_agent.original"] = value.decode("latin-1")
    if "server.address" not in described and (server := scope.get("server")):
        described["server.address"], described["server.port"] = server[0], server[1]
    if client := scope.get("client"):
        described["client.address"], described["client.port"] = client[0], client[1]
    span.set_attributes(described)


def name_by_route(app: ASGIApp) -> ASGIApp:
    """Once Litestar routed the request: the HTTP span named ``{method} {route}`` with
    ``http.route``, the route's template (a mount's path, ``/mcp``)."""

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


def http_span_of(scope: Any) -> SpanContext | None:
    """The HTTP server span's context of the request whose scope this is (None: not traced)."""
    found = scope.get(HTTP_SPAN) if isinstance(scope, dict) else None
    return found if isinstance(found, SpanContext) else None


def route_middleware() -> list[Middleware]:
    """The application's route middleware for HTTP spans (``name_by_route``): none when this
    process does not trace."""
    return [name_by_route] if TRACING.on else []


def with_http_spans(app: Any) -> None:
    """Wrap the Litestar application's handler (what its ``__call__`` runs for every request,
    around its exception handling) in ``HttpSpans`` when this process traces."""
    if TRACING.on:
        app.asgi_handler = HttpSpans(app.asgi_handler)

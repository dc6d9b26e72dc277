"""The MCP server span of each message, when this process traces.

The span is the MCP SDK's own (its ``OpenTelemetryMiddleware``, on by default in the SDK's
``Server``; left out when this process does not trace, where it would cost CPU on every call for
spans nobody records). It follows the MCP semantic conventions: a SERVER span named
``{mcp.method.name} {gen_ai.tool.name}`` (``tools/call pomodoro_start``, the name the client
called) with ``mcp.method.name``, ``mcp.protocol.version``, ``jsonrpc.request.id`` and, for
``tools/call``, ``gen_ai.operation.name=execute_tool`` and ``gen_ai.tool.name``; its parent is the
context the client put in ``params._meta`` (``traceparent``/``tracestate``, SEP-414's un-prefixed
keys) when there is one, else the current one, the HTTP server span (``service.http_tracing``).

``span_details``, the middleware right inside it, adds what the SDK does not: ``mcp.session.id``
when the request belongs to a session, ``network.transport``/``network.protocol.name``, and — when
the span's parent came from ``_meta`` — a link to the HTTP server span that carried the message.

``pushed`` is the span of a task's ending pushed to the client that waits for it (the 2025-11-25
``notifications/tasks/status`` on the session's stream, the 2026-07-28 ``notifications/tasks`` on a
``subscriptions/listen`` stream): a CLIENT span named by the notification's method, as the MCP
conventions name what the server initiates, under the span of the request that asked for the
pushes (the ``tools/call`` that started the task, the ``subscriptions/listen``), so the ending
joins the call's trace.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext
from opentelemetry import trace
from opentelemetry.trace import SpanKind

from service.http_tracing import http_span_of
from service.telemetry import TRACING, tracer

_SESSION_HEADER = b"mcp-session-id"


def sdk_tracing(defaults: list[ServerMiddleware[Any]]) -> list[ServerMiddleware[Any]]:
    """Of the SDK's default middleware (``Server.middleware`` as the SDK made it), its
    OpenTelemetry span and our details inside it when this process traces; nothing otherwise."""
    if not TRACING.on:
        return []
    spans = [m for m in defaults if "OpenTelemetry" in type(m).__name__]
    return [*spans, span_details] if spans else []


def _header(scope: Any, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return str(value.decode("latin-1"))
    return None


async def span_details(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    span = trace.get_current_span()
    request = ctx.request
    scope = getattr(request, "scope", None)
    if span.is_recording() and isinstance(scope, dict):
        span.set_attribute("network.transport", "tcp")
        span.set_attribute("network.protocol.name", "http")
        session = _header(scope, _SESSION_HEADER)
        if session:
            span.set_attribute("mcp.session.id", session)
        http = http_span_of(scope)
        parent = getattr(span, "parent", None)  # the SDK's span (ReadableSpan) knows its parent
        if http is not None and http.is_valid and (parent is None or parent.span_id != http.span_id):
            # Parented from _meta: the HTTP request that carried the message is linked.
            span.add_link(http, {"lineup.link": "http.request"})
    return await call_next(ctx)


@contextlib.contextmanager
def pushed(method: str, operation: Mapping[str, Any]) -> Iterator[None]:
    """The span of one pushed task ending: ``operation`` as the runtime reads it (its id, state and
    reason are the span's); nothing when the process does not trace."""
    if not TRACING.on:
        yield
        return
    attributes = {
        "mcp.method.name": method,
        "lineup.operation_id": str(operation.get("operation_id", "")),
        "lineup.operation.state": str(operation.get("state", "")),
        "lineup.operation.reason": str(operation.get("reason") or ""),
    }
    with tracer().start_as_current_span(method, kind=SpanKind.CLIENT, attributes=attributes):
        yield

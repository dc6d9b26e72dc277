"""The W3C trace context across the outbox: how a trace goes from a tool call, through Postgres, the
deadline sweeper and the relay, to the Agent's webhook (docs/tracing-outbox.md).

- A tool call made inside a span (the service traces: ``service.telemetry``) passes that span's
  context to ``call_tool_v3`` in its context document (``"traceparent"``, and ``"tracestate"``
  when not empty): ``tool_calls.traceparent`` records it, and every row the decision writes carries
  it — the operation it opens, the outbox rows it queues (``trace_producer``,
  ``service/db/sql/60_outbox.sql``). Without a span nothing is added.
- The deadline sweeper's settle is a span of its own, linked to each start call it settles
  (``service.use_cases.deadlines``); the outbox rows it queues carry its context.
- The relay's delivery attempts are spans linked to the row's stored context, and the Agent
  receives the attempt's context in ``traceparent``/``tracestate`` (``relay.delivery``).

Always the W3C Trace Context format (``traceparent``/``tracestate``), whatever ``OTEL_PROPAGATORS``
says: it is what the columns hold and what the webhook's headers are documented as.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from opentelemetry import trace
from opentelemetry.context import get_current
from opentelemetry.trace import Link, NonRecordingSpan, ProxyTracerProvider, Span, Tracer, TracerProvider
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import Attributes

from service.telemetry import TRACER_NAME

W3C = TraceContextTextMapPropagator()

# What a stored context must look like to be sent on as a header as it is (version 00's shape; a
# later version's is longer, and still forwarded only when it is printable ASCII without spaces).
_TRACEPARENT = re.compile(r"[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}(-[\x21-\x7e]*)?")
# tracestate: list members of printable ASCII (spaces and tabs allowed around them), no CR or LF.
_TRACESTATE = re.compile(r"[\x20-\x7e\t]*")
# W3C Trace Context: a vendor may cut tracestate beyond 512 characters; so do we, whole.
TRACESTATE_MAX = 512


def carrier(span: Span | None = None) -> dict[str, str] | None:
    """``span``'s W3C context (the current span's when None) as ``{"traceparent", "tracestate"?}``;
    None when it has no valid context (no span, or the API's no-op one)."""
    if span is None:
        current = get_current()
        if not current:  # nothing in the context at all (an untraced process's every call): no span
            return None
        span = trace.get_current_span(current)
    if not span.get_span_context().is_valid:
        return None
    found: dict[str, str] = {}
    W3C.inject(found, context=trace.set_span_in_context(span))
    return found


def link(
    traceparent: str | None, tracestate: str | None = None, attributes: Attributes = None
) -> Link | None:
    """A span link to a stored context; None when there is none, or it is not a valid one."""
    if not traceparent:
        return None
    headers = {"traceparent": traceparent}
    if tracestate:
        headers["tracestate"] = tracestate
    context = trace.get_current_span(W3C.extract(headers)).get_span_context()
    if not context.is_valid:
        return None
    return Link(context, attributes)


def parent(traceparent: str | None, tracestate: str | None = None) -> NonRecordingSpan | None:
    """A stored context as a span (for ``carrier`` or a parent); None when it is not valid."""
    found = link(traceparent, tracestate)
    return None if found is None else NonRecordingSpan(found.context)


def forwardable(traceparent: str | None, tracestate: str | None) -> tuple[str, str | None] | None:
    """A stored context as headers may carry it unchanged: ``(traceparent, tracestate or None)``,
    or None when the traceparent is missing or malformed (a malformed tracestate alone is left
    out)."""
    if not traceparent or not _TRACEPARENT.fullmatch(traceparent):
        return None
    if tracestate and (len(tracestate) > TRACESTATE_MAX or not _TRACESTATE.fullmatch(tracestate)):
        tracestate = None
    return traceparent, tracestate or None


def recording_tracer(provider: TracerProvider | None = None) -> Tracer | None:
    """The project's tracer from ``provider`` (the global one when None) when it is an installed
    provider, None when it is the API's default (nothing would be recorded): the caller then makes
    no span at all."""
    if provider is None:
        provider = trace.get_tracer_provider()
    if isinstance(provider, ProxyTracerProvider | trace.NoOpTracerProvider):
        return None
    return provider.get_tracer(TRACER_NAME)


def header_lines(found: Mapping[str, str] | None) -> bytes:
    """``traceparent`` and ``tracestate`` as HTTP/1.1 header lines (nothing for None)."""
    if not found:
        return b""
    lines = b"traceparent: %s\r\n" % found["traceparent"].encode("ascii")
    state = found.get("tracestate")
    if state:
        lines += b"tracestate: %s\r\n" % state.encode("ascii")
    return lines

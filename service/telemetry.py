"""Traces: the OpenTelemetry SDK, configured only by the standard ``OTEL_*`` variables.

Every process (``serve``, ``relay``, ``migrate`` has none) calls :func:`configure_tracing` once at
start. Nothing is exported, and nothing measurable is spent, unless the operator asks for traces:

- ``OTEL_SDK_DISABLED=true`` turns all of it off;
- otherwise traces are on when ``OTEL_TRACES_EXPORTER`` names an exporter (``otlp`` or
  ``console``; ``none`` is off) or an OTLP endpoint is set (``OTEL_EXPORTER_OTLP_ENDPOINT`` or
  ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``);
- the exporter reads its own variables (endpoint, headers, timeout, compression); the resource
  reads ``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES``; the sampler reads
  ``OTEL_TRACES_SAMPLER`` and ``OTEL_TRACES_SAMPLER_ARG``; the batch processor reads
  ``OTEL_BSP_*`` — all by the SDK itself, not re-implemented here;
- a TracerProvider someone already set (an embedding program, ``opentelemetry-instrument``) is
  respected: we add nothing to it.

The OTLP exporter speaks ``http/protobuf``; ``OTEL_EXPORTER_OTLP_PROTOCOL=grpc`` is refused with a
clear error at start (the gRPC exporter is not installed), never silently ignored.

Instrumented code uses only the API (``opentelemetry.trace.get_tracer``). Where a span would cost
the hot path something even unrecorded (the tool call's database span, the log lines' ids, the
HTTP and MCP instrumentations' middleware), it asks :func:`tracing_on` first: False until
:func:`configure_tracing` installed a provider or found one, so a process without traces spends a
boolean test per call and nothing else.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from opentelemetry import trace

#: The instrumentation scope every tracer of the project is named by.
TRACER_NAME = "lineup"

_OFF = {"", "none"}


class _Switch:
    """Whether this process traces: read on the hot path as one attribute."""

    __slots__ = ("on",)

    def __init__(self) -> None:
        self.on = False


#: ``TRACING.on``: a TracerProvider is installed (ours, or one someone set before us).
TRACING = _Switch()


class TracingConfigError(ValueError):
    """The ``OTEL_*`` variables ask for something this build cannot do."""


def tracing_requested(env: Mapping[str, str] | None = None) -> bool:
    """Whether the ``OTEL_*`` variables ask for traces (see the module's rules)."""
    env = os.environ if env is None else env
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporters = env.get("OTEL_TRACES_EXPORTER")
    if exporters is not None:
        return any(name.strip().lower() not in _OFF for name in exporters.split(","))
    return bool(env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT"))


def configure_tracing(default_service_name: str, env: Mapping[str, str] | None = None) -> bool:
    """Install the SDK's TracerProvider when the variables ask for traces; True when installed.

    ``default_service_name`` names the process (``lineup-serve``, ``lineup-relay``) when
    ``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES`` give no ``service.name``.
    """
    env = os.environ if env is None else env
    if provider_installed():
        TRACING.on = True  # someone set a provider before us: theirs stands, and is used
        return False
    if not tracing_requested(env):
        TRACING.on = False
        return False

    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        ConsoleSpanExporter,
        SpanExporter,
    )

    names = [n.strip().lower() for n in env.get("OTEL_TRACES_EXPORTER", "otlp").split(",")]
    exporters: list[SpanExporter] = []
    for name in names:
        if name in _OFF:
            continue
        if name == "console":
            exporters.append(ConsoleSpanExporter())
        elif name == "otlp":
            protocol = (
                env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
                or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
                or "http/protobuf"
            ).strip()
            if protocol != "http/protobuf":
                raise TracingConfigError(
                    f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol!r}: this build exports OTLP over "
                    "http/protobuf only; set it to http/protobuf (the collector's port 4318)"
                )
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporters.append(OTLPSpanExporter())
        else:
            raise TracingConfigError(
                f"OTEL_TRACES_EXPORTER names {name!r}: this build knows otlp, console and none"
            )

    resource = Resource.create()  # reads OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES itself
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: default_service_name}))
    provider = TracerProvider(resource=resource)
    for exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    TRACING.on = True
    return True


def provider_installed() -> bool:
    """Whether a real TracerProvider is the global one (not the API's proxy)."""
    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


def tracing_on() -> bool:
    """Whether this process traces (see :data:`TRACING`)."""
    return TRACING.on


class _Made:
    """The tracer ``tracer()`` made, and the provider it came from."""

    provider: trace.TracerProvider | None = None
    tracer: trace.Tracer | None = None


def tracer() -> trace.Tracer:
    """The project's tracer (the API's no-op one until a provider is installed), made once per
    provider: a provider's ``get_tracer`` builds and compares its instrumentation scope each time."""
    provider = trace.get_tracer_provider()
    made = _Made.tracer
    if made is None or _Made.provider is not provider:
        made = _Made.tracer = provider.get_tracer(TRACER_NAME)
        _Made.provider = provider
    return made


def trace_id_of(traceparent: str | None) -> str | None:
    """The trace id (32 lowercase hex digits) of a W3C ``traceparent`` header's value; None for
    none, a malformed one, or the all-zero (invalid) id."""
    if not traceparent:
        return None
    parts = traceparent.strip().split("-")
    if len(parts) < 4 or len(parts[0]) != 2 or parts[0] == "ff":
        return None
    trace_id = parts[1].lower()
    if len(trace_id) != 32 or trace_id == "0" * 32 or any(c not in "0123456789abcdef" for c in trace_id):
        return None
    return trace_id


def trace_url(template: str | None, trace_id: str | None) -> str | None:
    """``TRACE_URL_TEMPLATE`` with the trace id in place of ``{trace_id}`` (None without either)."""
    if not template or not trace_id:
        return None
    return template.replace("{trace_id}", trace_id)


def log_ids() -> dict[str, str] | None:
    """``trace_id`` and ``span_id`` (hex, as OpenTelemetry's log correlation writes them) of the
    current span when it records; None otherwise."""
    span = trace.get_current_span()
    if not span.is_recording():
        return None
    context = span.get_span_context()
    return {
        "trace_id": trace.format_trace_id(context.trace_id),
        "span_id": trace.format_span_id(context.span_id),
    }

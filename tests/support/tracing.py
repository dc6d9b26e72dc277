"""Traces in the tests with the service in-process (a real process exports to
``tests.support.otlp_receiver``).

``traced()`` installs one SDK TracerProvider with an ``InMemorySpanExporter`` as the global provider
for a test and turns the process's switch (``service.telemetry.TRACING``) on; at the end both are
back as they were (no provider: the API's proxy, the switch off), so no other test traces. The
provider is one per test process: the MCP SDK's tracer, resolved once through the API's proxy,
keeps writing to it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util._once import Once

from service.telemetry import TRACING

_EXPORTER = InMemorySpanExporter()
_PROVIDER = TracerProvider()
_PROVIDER.add_span_processor(SimpleSpanProcessor(_EXPORTER))


def _reset_global_provider() -> None:
    # What opentelemetry-test-utils' reset_trace_globals does: the API sets its provider once.
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace._TRACER_PROVIDER = None


@contextlib.contextmanager
def traced() -> Iterator[InMemorySpanExporter]:
    """The process traces, into the exporter it yields, until the block ends."""
    assert not TRACING.on, "a test before this one left the process tracing"
    _EXPORTER.clear()
    _reset_global_provider()
    trace.set_tracer_provider(_PROVIDER)
    TRACING.on = True
    try:
        yield _EXPORTER
    finally:
        TRACING.on = False
        _reset_global_provider()
        _EXPORTER.clear()


def traceparent(trace_id: str, span_id: str) -> str:
    return f"00-{trace_id}-{span_id}-01"

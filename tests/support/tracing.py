"""Traces in the tests: an OTLP/HTTP receiver for real processes, and an in-memory exporter for the
service in-process.

``OtlpReceiver`` is a collector's ``/v1/traces`` endpoint on 127.0.0.1: it decodes each
``ExportTraceServiceRequest`` (protobuf, as the SDK's OTLP/HTTP exporter sends it) with
``opentelemetry-proto`` and keeps its spans, flattened into ``Span`` records the tests read.

``traced()`` installs one SDK TracerProvider with an ``InMemorySpanExporter`` as the global provider
for a test and turns the process's switch (``service.telemetry.TRACING``) on; at the end both are
back as they were (no provider: the API's proxy, the switch off), so no other test traces. The
provider is one per test process: the MCP SDK's tracer, resolved once through the API's proxy,
keeps writing to it.
"""

from __future__ import annotations

import contextlib
import gzip
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry import trace
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util._once import Once

from service.telemetry import TRACING

KINDS = {0: "UNSPECIFIED", 1: "INTERNAL", 2: "SERVER", 3: "CLIENT", 4: "PRODUCER", 5: "CONSUMER"}


@dataclass(frozen=True)
class Link:
    trace_id: str
    span_id: str
    attributes: dict[str, Any]


@dataclass(frozen=True)
class Span:
    """A span as the receiver got it: ids in hex, its kind's name, attributes as Python values."""

    name: str
    kind: str
    trace_id: str
    span_id: str
    parent_span_id: str
    attributes: dict[str, Any]
    service_name: str
    status_code: int  # 0 unset, 1 ok, 2 error
    links: list[Link] = field(default_factory=list)


def _value(value: AnyValue) -> Any:
    which = value.WhichOneof("value")
    if which == "array_value":
        return [_value(v) for v in value.array_value.values]
    return getattr(value, which) if which else None


def _attributes(items: Any) -> dict[str, Any]:
    return {item.key: _value(item.value) for item in items}


def decode(body: bytes) -> list[Span]:
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    spans = []
    for resource_spans in request.resource_spans:
        service = _attributes(resource_spans.resource.attributes).get("service.name", "")
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                spans.append(
                    Span(
                        name=span.name,
                        kind=KINDS[span.kind],
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_span_id=span.parent_span_id.hex(),
                        attributes=_attributes(span.attributes),
                        service_name=service,
                        status_code=span.status.code,
                        links=[
                            Link(link.trace_id.hex(), link.span_id.hex(), _attributes(link.attributes))
                            for link in span.links
                        ],
                    )
                )
    return spans


class OtlpReceiver:
    """An OTLP/HTTP traces endpoint on a free port of 127.0.0.1 (``endpoint`` is its base URL, for
    ``OTEL_EXPORTER_OTLP_ENDPOINT``)."""

    def __init__(self) -> None:
        self.spans: list[Span] = []
        self.requests = 0
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                if self.headers.get("content-encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path != "/v1/traces" or self.headers.get("content-type") != "application/x-protobuf":
                    self.send_response(404)
                    self.end_headers()
                    return
                spans = decode(body)
                with receiver._lock:
                    receiver.spans.extend(spans)
                    receiver.requests += 1
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> OtlpReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def received(self) -> list[Span]:
        with self._lock:
            return list(self.spans)

    def wait_for(self, predicate: Any, timeout: float = 30.0) -> list[Span]:
        """The spans received once ``predicate(spans)`` holds (the batch processor exports every
        few seconds; the test sets ``OTEL_BSP_SCHEDULE_DELAY`` short)."""
        deadline = time.monotonic() + timeout
        while True:
            spans = self.received()
            if predicate(spans):
                return spans
            if time.monotonic() > deadline:
                names = sorted({s.name for s in spans})
                raise AssertionError(f"the spans awaited did not arrive in {timeout} s; got {names}")
            time.sleep(0.1)


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

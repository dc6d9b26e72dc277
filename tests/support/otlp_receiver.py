"""An OTLP/HTTP trace receiver for the tests: what a collector would get from our processes.

``POST /v1/traces`` with an ``ExportTraceServiceRequest`` in protobuf (the OTLP exporter's
``http/protobuf``, gzip or not) is decoded with ``opentelemetry-proto`` — the real wire format, not
the SDK's objects — and every span is kept as a :class:`ReceivedSpan`. Point a process at it with
``OTEL_EXPORTER_OTLP_ENDPOINT=<receiver.endpoint>`` (see :meth:`OtlpReceiver.environment`).
"""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan

#: OTLP's span kinds by number, as the SDK names them.
KINDS = {
    ProtoSpan.SPAN_KIND_UNSPECIFIED: "UNSPECIFIED",
    ProtoSpan.SPAN_KIND_INTERNAL: "INTERNAL",
    ProtoSpan.SPAN_KIND_SERVER: "SERVER",
    ProtoSpan.SPAN_KIND_CLIENT: "CLIENT",
    ProtoSpan.SPAN_KIND_PRODUCER: "PRODUCER",
    ProtoSpan.SPAN_KIND_CONSUMER: "CONSUMER",
}


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return _attributes(value.kvlist_value.values)
    return None if kind is None else getattr(value, kind)


def _attributes(pairs: Any) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for pair in pairs:
        assert isinstance(pair, KeyValue)
        found[pair.key] = _value(pair.value)
    return found


@dataclass(frozen=True)
class ReceivedLink:
    trace_id: str  # 32 hex digits
    span_id: str  # 16 hex digits
    trace_state: str
    attributes: dict[str, Any]


@dataclass(frozen=True)
class ReceivedSpan:
    service: str  # its resource's service.name
    name: str
    kind: str  # INTERNAL, SERVER, CLIENT, PRODUCER, CONSUMER
    trace_id: str
    span_id: str
    parent_span_id: str  # "" for a root span
    attributes: dict[str, Any]
    links: list[ReceivedLink] = field(default_factory=list)
    status: str = "UNSET"  # UNSET, OK, ERROR

    @property
    def traceparent(self) -> str:
        """Its context as a W3C traceparent, sampled (flags aside)."""
        return f"00-{self.trace_id}-{self.span_id}"


def decode(body: bytes) -> list[ReceivedSpan]:
    """Every span of one ``ExportTraceServiceRequest``."""
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    spans = []
    for resource_spans in request.resource_spans:
        service = str(_attributes(resource_spans.resource.attributes).get("service.name", ""))
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                spans.append(
                    ReceivedSpan(
                        service=service,
                        name=span.name,
                        kind=KINDS[span.kind],
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_span_id=span.parent_span_id.hex(),
                        attributes=_attributes(span.attributes),
                        links=[
                            ReceivedLink(
                                trace_id=link.trace_id.hex(),
                                span_id=link.span_id.hex(),
                                trace_state=link.trace_state,
                                attributes=_attributes(link.attributes),
                            )
                            for link in span.links
                        ],
                        status={0: "UNSET", 1: "OK", 2: "ERROR"}[span.status.code],
                    )
                )
    return spans


class OtlpReceiver:
    """``with OtlpReceiver() as collector:`` an OTLP/HTTP endpoint on 127.0.0.1 in a thread."""

    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self.requests = 0
        self._changed = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                if self.headers.get("content-encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path != "/v1/traces":
                    self.send_error(404)
                    return
                received = decode(body)
                with receiver._changed:
                    receiver.spans.extend(received)
                    receiver.requests += 1
                    receiver._changed.notify_all()
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *_: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="otlp-receiver", daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def environment(self) -> dict[str, str]:
        """What a process needs to export its spans here at once (a batch every 100 ms)."""
        return {
            "OTEL_EXPORTER_OTLP_ENDPOINT": self.endpoint,
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            "OTEL_BSP_SCHEDULE_DELAY": "100",
        }

    def wait_for(
        self, found: Callable[[list[ReceivedSpan]], bool], timeout: float = 20.0
    ) -> list[ReceivedSpan]:
        """Every span received, once ``found`` holds of them (AssertionError after ``timeout``)."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not found(self.spans):
                left = deadline - time.monotonic()
                if left <= 0:
                    names = sorted({(s.service, s.name) for s in self.spans})
                    raise AssertionError(f"spans not received within {timeout}s; received: {names}")
                self._changed.wait(left)
            return list(self.spans)

    def named(self, name: str) -> list[ReceivedSpan]:
        with self._changed:
            return [s for s in self.spans if s.name == name]

    def __enter__(self) -> OtlpReceiver:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(10)

"""The spans of a tool call, with the service in-process and the SDK's in-memory exporter: the HTTP
server span (HTTP semantic conventions, parented to the caller's ``traceparent``), the one database
client span under it with the decision's outcome, the SQLSTATE of a failed statement, log lines
that carry the span's ids, and nothing at all when the process does not trace."""

from __future__ import annotations

import io
import json
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from litestar.testing import AsyncTestClient
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode, format_span_id, format_trace_id

from service.app import create_app
from service.manifests import Registry
from service.settings import Settings
from service.telemetry import TRACING
from tests.conftest import AGENT, OPERATOR, make_settings
from tests.support.tracing import traced, traceparent

CLIENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN = "00f067aa0ba902b7"


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    with traced() as spans:
        yield spans


@pytest.fixture
async def traced_client(
    exporter: InMemorySpanExporter, settings: Settings, registry: Registry
) -> AsyncIterator[AsyncTestClient[Any]]:
    async with AsyncTestClient(app=create_app(settings, registry, sweeper=False)) as client:
        yield client


def start_body(conversation: str, call: str | None = None) -> dict[str, Any]:
    return {
        "tool_call_id": call or f"start-{uuid.uuid4()}",
        "conversation_id": conversation,
        "tool": "pomodoro.start",
        "arguments": {"duration_seconds": 1500, "activity": "traces"},
    }


def written_lines(stream: io.TextIOWrapper) -> list[dict[str, Any]]:
    """The JSON lines written to ``stream`` (the process's stderr, swapped by the test)."""
    stream.flush()
    raw = stream.buffer
    assert isinstance(raw, io.BytesIO)
    return [json.loads(line) for line in raw.getvalue().decode().splitlines() if line.startswith("{")]


def by_name(spans: tuple[ReadableSpan, ...], name: str) -> list[ReadableSpan]:
    return [span for span in spans if span.name == name]


async def test_a_rest_tool_call_is_an_http_server_span_under_the_callers_trace_with_its_statement_under_it(
    traced_client: AsyncTestClient[Any], exporter: InMemorySpanExporter
) -> None:
    body = start_body(f"traced-{uuid.uuid4()}")
    answer = await traced_client.post(
        "/v1/tool-calls", json=body, headers={**AGENT, "traceparent": traceparent(CLIENT_TRACE, CLIENT_SPAN)}
    )
    assert answer.status_code == 202
    spans = exporter.get_finished_spans()
    (http,) = by_name(spans, "POST /v1/tool-calls")
    assert http.kind is SpanKind.SERVER
    assert format_trace_id(http.context.trace_id) == CLIENT_TRACE
    assert http.parent is not None and format_span_id(http.parent.span_id) == CLIENT_SPAN
    attributes = dict(http.attributes or {})
    assert attributes["http.request.method"] == "POST"
    assert attributes["url.path"] == "/v1/tool-calls"
    assert attributes["http.route"] == "/v1/tool-calls"
    assert attributes["http.response.status_code"] == 202
    assert "http.method" not in attributes  # the stable conventions only, not the old names

    (statement,) = by_name(spans, "SELECT call_tool_v3")
    assert statement.kind is SpanKind.CLIENT
    assert statement.parent is not None and statement.parent.span_id == http.context.span_id
    assert statement.context.trace_id == http.context.trace_id
    db = dict(statement.attributes or {})
    assert db["db.system.name"] == "postgresql"
    assert db["db.query.summary"] == "SELECT call_tool_v3"
    assert db["lineup.outcome"] == "accepted"
    assert db["lineup.replayed"] is False
    assert db["lineup.tool_call_id"] == body["tool_call_id"]
    assert "db.response.status_code" not in db
    # One statement, one span: nothing of what the function runs inside is a span of its own.
    assert [s.name for s in spans if s.kind is SpanKind.CLIENT] == ["SELECT call_tool_v3"]

    # A route with a parameter is named by its template, never by the request's own path; a path
    # no route takes by its method alone.
    read = await traced_client.get(f"/v1/ops/tool-calls/{body['tool_call_id']}", headers=OPERATOR)
    assert read.status_code == 200
    assert (await traced_client.get("/no/such/route", headers=AGENT)).status_code == 404
    (ops,) = [s for s in exporter.get_finished_spans() if s.name.startswith("GET")][:1]
    assert ops.name == "GET /v1/ops/tool-calls/{tool_call_id}"
    assert dict(ops.attributes or {})["http.route"] == "/v1/ops/tool-calls/{tool_call_id}"
    (unrouted,) = [s for s in exporter.get_finished_spans() if s.name == "GET"]
    assert dict(unrouted.attributes or {})["http.response.status_code"] == 404
    assert "http.route" not in dict(unrouted.attributes or {})
    assert not [s for s in exporter.get_finished_spans() if body["tool_call_id"] in s.name]

    again = await traced_client.post("/v1/tool-calls", json=body, headers=AGENT)
    assert again.status_code == 202
    replayed = by_name(exporter.get_finished_spans(), "SELECT call_tool_v3")[-1]
    assert dict(replayed.attributes or {})["lineup.replayed"] is True
    # Without a traceparent the call is a trace of its own.
    assert replayed.context.trace_id != http.context.trace_id


async def test_a_statement_the_database_refused_carries_its_sqlstate(
    exporter: InMemorySpanExporter, database_url: str, registry: Registry
) -> None:
    # One call per conversation per window: the second is refused by the statement (RAISE, P0001).
    settings = make_settings(database_url, agent_tool_call_limit=1)
    conversation = f"limited-{uuid.uuid4()}"
    async with AsyncTestClient(app=create_app(settings, registry, sweeper=False)) as client:
        assert (
            await client.post("/v1/tool-calls", json=start_body(conversation), headers=AGENT)
        ).status_code == 202
        refused = await client.post("/v1/tool-calls", json=start_body(conversation), headers=AGENT)
    assert refused.status_code == 429
    statements = by_name(exporter.get_finished_spans(), "SELECT call_tool_v3")
    failed = statements[-1]
    assert failed.status.status_code is StatusCode.ERROR
    attributes = dict(failed.attributes or {})
    assert attributes["db.response.status_code"] == "P0001"
    assert attributes["error.type"] == "P0001"
    assert "lineup.outcome" not in attributes
    assert failed.parent is not None
    parent = failed.parent.span_id
    (http,) = [
        s
        for s in exporter.get_finished_spans()
        if s.name == "POST /v1/tool-calls" and s.context.span_id == parent
    ]
    assert dict(http.attributes or {})["http.response.status_code"] == 429


async def test_log_lines_inside_the_call_carry_its_trace_and_span_ids(
    traced_client: AsyncTestClient[Any], exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    stderr = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    monkeypatch.setattr(sys, "stderr", stderr)
    body = start_body(f"logged-{uuid.uuid4()}")
    assert (await traced_client.post("/v1/tool-calls", json=body, headers=AGENT)).status_code == 202
    lines = written_lines(stderr)
    (logged,) = [line for line in lines if line.get("event") == "tool_call"]
    (http,) = by_name(exporter.get_finished_spans(), "POST /v1/tool-calls")
    assert logged["trace_id"] == format_trace_id(http.context.trace_id)
    assert logged["span_id"] == format_span_id(http.context.span_id)


async def test_without_traces_nothing_is_instrumented_and_no_line_carries_ids(
    client: AsyncTestClient[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert not TRACING.on
    assert client.app.middleware == []
    stderr = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    monkeypatch.setattr(sys, "stderr", stderr)
    body = start_body(f"untraced-{uuid.uuid4()}")
    answer = await client.post(
        "/v1/tool-calls", json=body, headers={**AGENT, "traceparent": traceparent(CLIENT_TRACE, CLIENT_SPAN)}
    )
    assert answer.status_code == 202
    lines = written_lines(stderr)
    (logged,) = [line for line in lines if line.get("event") == "tool_call"]
    assert "trace_id" not in logged and "span_id" not in logged


async def test_a_call_the_agent_did_not_sample_records_no_span(
    traced_client: AsyncTestClient[Any], exporter: InMemorySpanExporter
) -> None:
    unsampled = f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-00"  # the Agent's sampler dropped its trace
    body = start_body(f"unsampled-{uuid.uuid4()}")
    answer = await traced_client.post(
        "/v1/tool-calls", json=body, headers={**AGENT, "traceparent": unsampled}
    )
    assert answer.status_code == 202
    assert exporter.get_finished_spans() == ()
    sampled = await traced_client.post(
        "/v1/tool-calls", json=start_body(f"sampled-{uuid.uuid4()}"), headers=AGENT
    )
    assert sampled.status_code == 202
    assert sorted(s.name for s in exporter.get_finished_spans()) == [
        "POST /v1/tool-calls",
        "SELECT call_tool_v3",
    ]

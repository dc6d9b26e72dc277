"""A real ``serve`` exporting its spans over OTLP/HTTP to a receiver the test runs (decoding the
protobuf with ``opentelemetry-proto``), configured by the standard variables only: a REST tool call
is an HTTP server span under the client's ``traceparent`` with the statement's client span under
it; an MCP ``tools/call`` is the MCP server span the conventions name, parented to
``params._meta.traceparent`` and linked to the HTTP request that carried it; with traces asked off,
nothing is sent."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness.calls import interrupt_body
from harness.database import DatabaseFactory
from harness.mcp import bound, mcp_session
from tests.conftest import AGENT, HOST, OPERATOR, ServiceProcess, service_on_own_database
from tests.support.otlp_receiver import OtlpReceiver
from tests.support.otlp_receiver import ReceivedSpan as Span
from tests.support.tracing import traceparent

pytestmark = pytest.mark.e2e

MCP_HEADERS = {
    **AGENT,
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
}
# Every attribute a span of ours carries, by the conventions each follows (the test lists them).
HTTP_SERVER = {"http.request.method", "url.path", "url.scheme", "http.route", "http.response.status_code"}
DB_CLIENT = {"db.system.name", "db.query.summary", "db.namespace", "server.address", "server.port"}
MCP_SERVER = {
    "mcp.method.name",
    "gen_ai.tool.name",
    "gen_ai.operation.name",
    "mcp.protocol.version",
    "mcp.session.id",
    "jsonrpc.request.id",
    "network.transport",
}


@pytest.fixture(scope="module")
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as running:
        yield running


@pytest.fixture(scope="module")
def service(
    database_factory: DatabaseFactory, tmp_path_factory: pytest.TempPathFactory, receiver: OtlpReceiver
) -> Iterator[ServiceProcess]:
    env = {**receiver.environment(), "OTEL_SERVICE_NAME": "lineup-under-test"}
    with service_on_own_database(database_factory, tmp_path_factory.mktemp("traced"), **env) as process:
        yield process


def in_trace(spans: list[Span], trace_id: str) -> list[Span]:
    return [span for span in spans if span.trace_id == trace_id]


def test_a_rest_call_is_one_trace_under_the_agents_traceparent(
    service: ServiceProcess, receiver: OtlpReceiver
) -> None:
    trace_id, parent = uuid.uuid4().hex, uuid.uuid4().hex[:16]
    body = {
        "tool_call_id": f"start-{uuid.uuid4()}",
        "conversation_id": f"traced-{uuid.uuid4()}",
        "tool": "pomodoro.start",
        "arguments": {"duration_seconds": 1500, "activity": "traces"},
    }
    answer = httpx.post(
        f"{service.base_url}/v1/tool-calls",
        json=body,
        headers={**AGENT, "traceparent": traceparent(trace_id, parent)},
        timeout=10,
    )
    assert answer.status_code == 202

    spans = in_trace(receiver.wait_for(lambda got: len(in_trace(got, trace_id)) >= 2), trace_id)
    (http,) = [s for s in spans if s.kind == "SERVER"]
    assert http.name == "POST /v1/tool-calls" and http.parent_span_id == parent
    assert http.service == "lineup-under-test"
    assert set(http.attributes) >= HTTP_SERVER
    assert http.attributes["http.response.status_code"] == 202
    (statement,) = [s for s in spans if s.kind == "CLIENT"]
    assert statement.name == "SELECT call_tool_v3" and statement.parent_span_id == http.span_id
    assert set(statement.attributes) >= DB_CLIENT
    assert statement.attributes["db.system.name"] == "postgresql"
    assert statement.attributes["lineup.outcome"] == "accepted"


def test_an_mcp_tools_call_is_the_conventions_server_span_under_its_meta_traceparent(
    service: ServiceProcess, receiver: OtlpReceiver
) -> None:
    url = f"{service.base_url}/mcp"
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"},
        },
    }
    opened = httpx.post(url, json=initialize, headers=MCP_HEADERS, timeout=10)
    assert opened.status_code == 200
    session = opened.headers["mcp-session-id"]
    headers = {**MCP_HEADERS, "mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert httpx.post(url, json=initialized, headers=headers, timeout=10).status_code == 202

    meta_trace, meta_span = uuid.uuid4().hex, uuid.uuid4().hex[:16]
    http_trace, http_parent = uuid.uuid4().hex, uuid.uuid4().hex[:16]
    call = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {
            "name": "pomodoro_start",
            "arguments": {"duration_seconds": 1500, "activity": "traced over MCP"},
            "_meta": {
                "io.lineup/conversation_id": f"mcp-traced-{uuid.uuid4()}",
                "io.lineup/tool_call_id": f"start-{uuid.uuid4()}",
                "traceparent": traceparent(meta_trace, meta_span),
                "tracestate": "vendor=value",
            },
        },
    }
    answered = httpx.post(
        url, json=call, headers={**headers, "traceparent": traceparent(http_trace, http_parent)}, timeout=10
    )
    assert answered.status_code == 200 and "error" not in answered.json(), answered.text

    got = receiver.wait_for(
        lambda got: len(in_trace(got, meta_trace)) >= 2 and bool(in_trace(got, http_trace))
    )
    (carrier,) = in_trace(got, http_trace)
    assert carrier.kind == "SERVER" and carrier.name == "POST /mcp" and carrier.parent_span_id == http_parent
    assert carrier.attributes["http.route"] == "/mcp"

    spans = in_trace(got, meta_trace)
    (mcp,) = [s for s in spans if s.kind == "SERVER"]
    assert mcp.name == "tools/call pomodoro_start"
    assert mcp.parent_span_id == meta_span
    assert set(mcp.attributes) >= MCP_SERVER
    assert mcp.attributes["mcp.method.name"] == "tools/call"
    assert mcp.attributes["gen_ai.tool.name"] == "pomodoro_start"
    assert mcp.attributes["gen_ai.operation.name"] == "execute_tool"
    assert mcp.attributes["mcp.protocol.version"] == "2025-11-25"
    assert mcp.attributes["mcp.session.id"] == session
    assert mcp.attributes["jsonrpc.request.id"] == "7"
    # Parented from _meta: linked to the HTTP request that carried the message.
    assert [(link.trace_id, link.span_id) for link in mcp.links] == [(carrier.trace_id, carrier.span_id)]
    (statement,) = [s for s in spans if s.kind == "CLIENT"]
    assert statement.parent_span_id == mcp.span_id
    assert statement.attributes["lineup.outcome"] == "accepted"


def test_with_traces_asked_off_nothing_is_sent(
    database_factory: DatabaseFactory, tmp_path: Path, receiver: OtlpReceiver
) -> None:
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        "OTEL_TRACES_EXPORTER": "none",
        "OTEL_BSP_SCHEDULE_DELAY": "100",
    }
    trace_id = uuid.uuid4().hex
    with service_on_own_database(database_factory, tmp_path, **env) as untraced:
        body: dict[str, Any] = {
            "tool_call_id": f"start-{uuid.uuid4()}",
            "conversation_id": f"untraced-{uuid.uuid4()}",
            "tool": "pomodoro.start",
            "arguments": {"duration_seconds": 1500, "activity": "no traces"},
        }
        headers = {**AGENT, "traceparent": traceparent(trace_id, uuid.uuid4().hex[:16])}
        answer = httpx.post(f"{untraced.base_url}/v1/tool-calls", json=body, headers=headers, timeout=10)
        assert answer.status_code == 202
        time.sleep(1.0)  # ten export intervals: a span would have been sent by now
    assert in_trace(list(receiver.spans), trace_id) == []


async def test_a_tasks_pushed_ending_joins_the_trace_of_the_call_that_started_it(
    service: ServiceProcess, receiver: OtlpReceiver
) -> None:
    trace_id, parent = uuid.uuid4().hex, uuid.uuid4().hex[:16]
    cid = f"pushed-{uuid.uuid4()}"
    meta = {**bound(cid), "traceparent": traceparent(trace_id, parent)}
    async with mcp_session(service.base_url) as mcp:
        params = {
            "name": "pomodoro.start",
            "arguments": {"duration_seconds": 1500, "activity": "pushed"},
            "task": {"ttl": 60_000},
            "_meta": meta,
        }
        task_id = (await mcp.request("tools/call", params))["task"]["taskId"]
        async with httpx.AsyncClient(timeout=10) as http:
            answer = await http.post(
                f"{service.base_url}/v1/tool-calls", json=interrupt_body(cid), headers=AGENT
            )
        assert answer.json()["status"] == "interrupted"
        pushed = await asyncio.wait_for(mcp.statuses.get(), 10)
    assert pushed.task_id == task_id

    def arrived(spans: list[Span]) -> bool:
        return any(s.name == "notifications/tasks/status" for s in in_trace(spans, trace_id))

    spans = in_trace(receiver.wait_for(arrived), trace_id)
    (call,) = [s for s in spans if s.name == "tools/call pomodoro.start"]
    assert call.parent_span_id == parent
    (push,) = [s for s in spans if s.name == "notifications/tasks/status"]
    assert push.kind == "CLIENT" and push.parent_span_id == call.span_id
    assert push.attributes["mcp.method.name"] == "notifications/tasks/status"
    assert push.attributes["lineup.operation_id"] == task_id
    assert (push.attributes["lineup.operation.state"], push.attributes["lineup.operation.reason"]) == (
        "interrupted",
        "agent_interrupt",
    )


async def test_an_ending_pushed_on_the_event_stream_is_a_span_of_the_stream(
    service: ServiceProcess, receiver: OtlpReceiver
) -> None:
    trace_id, parent = uuid.uuid4().hex, uuid.uuid4().hex[:16]
    cid = f"streamed-{uuid.uuid4()}"
    url = f"{service.base_url}/v1/host/conversations/{cid}/events"
    headers = {**HOST, "traceparent": traceparent(trace_id, parent)}
    async with httpx.AsyncClient(timeout=10) as http, http.stream("GET", url, headers=headers) as stream:
        assert stream.status_code == 200
        lines = stream.aiter_lines()
        assert (await anext(lines)).startswith(":")  # the stream is open: what follows is pushed
        started = await http.post(
            f"{service.base_url}/v1/tool-calls",
            json={
                "tool_call_id": f"start-{uuid.uuid4()}",
                "conversation_id": cid,
                "tool": "pomodoro.start",
                "arguments": {"duration_seconds": 1500, "activity": "streamed"},
            },
            headers=AGENT,
        )
        operation_id = started.json()["operation"]["operation_id"]
        await http.post(f"{service.base_url}/v1/tool-calls", json=interrupt_body(cid), headers=AGENT)
        async with asyncio.timeout(10):
            async for line in lines:
                if line.startswith("data:") and '"finalized_at":"' in line.replace(" ", ""):
                    break

    def arrived(spans: list[Span]) -> bool:
        return any(s.name == "push operation" for s in in_trace(spans, trace_id))

    spans = in_trace(receiver.wait_for(arrived), trace_id)
    (push,) = [s for s in spans if s.name == "push operation"]
    assert push.kind == "PRODUCER"
    assert push.attributes["lineup.operation_id"] == operation_id
    assert push.attributes["lineup.conversation_id"] == cid
    assert push.attributes["lineup.operation.state"] == "interrupted"


def test_the_operators_trace_of_a_traced_call_names_its_trace(
    service: ServiceProcess, receiver: OtlpReceiver
) -> None:
    """The call stores the context of the span it was made in (service.trace_context): its trace."""
    trace_id = uuid.uuid4().hex
    call_id = f"start-{uuid.uuid4()}"
    body = {
        "tool_call_id": call_id,
        "conversation_id": f"found-{uuid.uuid4()}",
        "tool": "pomodoro.start",
        "arguments": {"duration_seconds": 1500, "activity": "found again"},
    }
    headers = {**AGENT, "traceparent": traceparent(trace_id, uuid.uuid4().hex[:16])}
    assert (
        httpx.post(f"{service.base_url}/v1/tool-calls", json=body, headers=headers, timeout=10).status_code
        == 202
    )
    read = httpx.get(f"{service.base_url}/v1/ops/tool-calls/{call_id}", headers=OPERATOR, timeout=10)
    assert read.json()["tool_call"]["trace_id"] == trace_id

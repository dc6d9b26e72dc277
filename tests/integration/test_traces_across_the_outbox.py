"""The trace context crosses the outbox: a call's span is kept with the rows it writes, the deadline
sweeper's settle is a span linked to the start calls, and each delivery attempt is a span linked to
the row's stored context whose own context the Agent receives (service.trace_context,
relay.delivery). Spans are read from the SDK's in-memory exporter."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from litestar.testing import AsyncTestClient
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import (
    NonRecordingSpan,
    NoOpTracerProvider,
    SpanContext,
    SpanKind,
    TraceFlags,
    TraceState,
)

from harness.calls import expire, interrupt_body, start_body
from harness.receiver import Receiver, fail_first, new_secret
from harness.receiver import Reply as ReceiverReply
from service.db.pool import Pool, open_pool
from service.trace_context import carrier
from service.use_cases.deadlines import SETTLE_SPAN, DeadlineSweeper
from service.wakeups import Wakeups
from tests.conftest import AGENT, HOST
from tests.support.outbox import queue_results, relay_config, running_relay, wait_until

Client = AsyncTestClient[Any]
Db = psycopg.Connection[dict[str, Any]]

TRACEPARENT = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}")


def _traceparent(context: SpanContext) -> str:
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"


@pytest.fixture
def spans() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


@pytest.fixture
async def pool(database_url: str) -> Any:
    pool = await open_pool(database_url, size=4)
    yield pool
    await pool.close()


def _agent_span(provider: TracerProvider, name: str = "agent turn") -> Any:
    """A span of the Agent's, under a remote parent carrying a tracestate (it is inherited)."""
    remote = SpanContext(
        trace_id=uuid.uuid4().int,
        span_id=uuid.uuid4().int >> 64,
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
        trace_state=TraceState([("agentvendor", "t61rcWkgMzE")]),
    )
    parent = trace.set_span_in_context(NonRecordingSpan(remote))
    return provider.get_tracer("test").start_as_current_span(name, context=parent)


def _context(span: Any) -> dict[str, str]:
    found = carrier(span)
    assert found is not None
    return found


def _row(db: Db, sql: str, *params: Any) -> dict[str, Any]:
    row = db.execute(sql, params).fetchone()
    assert row is not None
    return row


def _named(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == name]


async def test_a_call_made_in_a_span_keeps_its_context_with_the_rows_it_writes(
    client: Client, db: Db, spans: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, _ = spans
    with _agent_span(provider) as started:
        answer = await client.post("/v1/tool-calls", json=start_body("conv-tr"), headers=AGENT)
    assert answer.status_code == 202
    start = _context(started)
    assert start["tracestate"] == "agentvendor=t61rcWkgMzE"
    call = _row(db, "SELECT traceparent, tracestate FROM tool_calls WHERE conversation_id = 'conv-tr'")
    assert call == start
    operation_id = answer.json()["operation"]["operation_id"]
    operation = _row(
        db, "SELECT traceparent, tracestate FROM operations WHERE operation_id = %s", operation_id
    )
    assert operation == start

    # The interrupt produces the start call's result: its outbox row carries the interrupt's context.
    with _agent_span(provider, "agent interrupt") as interrupting:
        answer = await client.post("/v1/tool-calls", json=interrupt_body("conv-tr"), headers=AGENT)
    assert answer.json()["status"] == "interrupted"
    row = _row(db, "SELECT traceparent, tracestate FROM outbox WHERE operation_id = %s", operation_id)
    assert row == _context(interrupting)
    assert row["traceparent"] != start["traceparent"]


async def test_a_call_made_without_a_span_keeps_no_context(client: Client, db: Db) -> None:
    assert not trace.get_current_span().get_span_context().is_valid
    answer = await client.post("/v1/tool-calls", json=start_body("conv-untraced"), headers=AGENT)
    await client.post("/v1/tool-calls", json=interrupt_body("conv-untraced"), headers=AGENT)
    assert answer.status_code == 202
    for table in ("tool_calls", "operations", "outbox"):
        rows = db.execute(
            f"SELECT traceparent, tracestate FROM {table} WHERE conversation_id = 'conv-untraced'"
        ).fetchall()
        assert rows and all(r == {"traceparent": None, "tracestate": None} for r in rows), table


async def test_an_answered_question_s_result_carries_the_asking_calls_context(
    client: Client, db: Db, spans: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    # The person's answer is no Tool call (its request says no context to the database): the
    # result of interact.ask carries the context of the call that asked.
    provider, _ = spans
    body = {
        "tool_call_id": "ask-traced",
        "conversation_id": "conv-ask",
        "tool": "interact.ask",
        "arguments": {"prompt": "Another round?", "choices": ["yes", "no"]},
    }
    with _agent_span(provider) as asking:
        assert (await client.post("/v1/tool-calls", json=body, headers=AGENT)).status_code == 202
    answered = await client.post(
        "/v1/host/interactions/ask-traced/answer", json={"answer": "yes"}, headers=HOST
    )
    assert answered.status_code == 200, answered.text
    row = _row(db, "SELECT traceparent, tracestate FROM outbox WHERE tool_call_id = 'ask-traced'")
    assert row == _context(asking)


async def test_the_sweepers_settle_is_a_span_linked_to_each_start_and_its_rows_carry_it(
    client: Client, db: Db, pool: Pool, spans: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, exporter = spans
    with _agent_span(provider) as started:
        traced = (await client.post("/v1/tool-calls", json=start_body("conv-s1"), headers=AGENT)).json()
    untraced = (await client.post("/v1/tool-calls", json=start_body("conv-s2"), headers=AGENT)).json()
    sweeper = DeadlineSweeper(pool, Wakeups(), tracer_provider=provider)
    assert await sweeper.sweep_once() == []
    assert _named(exporter, SETTLE_SPAN) == []  # a claim that finds nothing makes no span

    for answer in (traced, untraced):
        expire(db, answer["operation"]["operation_id"])
    settled = await sweeper.sweep_once()
    assert {r["conversation_id"] for r in settled} == {"conv-s1", "conv-s2"}

    (span,) = _named(exporter, SETTLE_SPAN)
    assert span.kind is SpanKind.INTERNAL
    assert span.parent is None
    assert span.attributes is not None
    assert span.attributes["lineup.operations.due"] == 2
    assert span.attributes["lineup.operations.settled"] == 2
    # One link, to the traced start (the other kept no context); never its parent.
    (link,) = span.links
    assert link.context.trace_id == started.get_span_context().trace_id
    assert link.context.span_id == started.get_span_context().span_id
    assert link.context.trace_state.get("agentvendor") == "t61rcWkgMzE"
    assert link.attributes is not None
    assert link.attributes["lineup.operation_id"] == traced["operation"]["operation_id"]
    assert link.attributes["lineup.conversation_id"] == "conv-s1"
    # Both outbox rows carry the settle's context.
    rows = db.execute("SELECT traceparent, tracestate FROM outbox ORDER BY conversation_id").fetchall()
    parsed = [TRACEPARENT.fullmatch(r["traceparent"]) for r in rows]
    assert len(rows) == 2 and all(parsed)
    assert {(int(m.group(1), 16), int(m.group(2), 16)) for m in parsed if m} == {
        (span.context.trace_id, span.context.span_id)
    }


async def test_an_untraced_sweeper_leaves_each_row_its_start_calls_context(
    client: Client, db: Db, pool: Pool, spans: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, _ = spans
    with _agent_span(provider) as started:
        answer = (await client.post("/v1/tool-calls", json=start_body("conv-u"), headers=AGENT)).json()
    expire(db, answer["operation"]["operation_id"])
    (settled,) = await DeadlineSweeper(pool, Wakeups(), tracer_provider=NoOpTracerProvider()).sweep_once()
    assert settled["conversation_id"] == "conv-u"
    row = _row(db, "SELECT traceparent, tracestate FROM outbox WHERE conversation_id = 'conv-u'")
    assert row == _context(started)


async def test_on_citus_each_due_conversation_is_a_span_of_its_own(
    client: Client, db: Db, pool: Pool, spans: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    # The distributed sweep runs on one PostgreSQL as well (settle_due_in_traced is not delegated).
    provider, exporter = spans
    starts = {}
    for conversation_id in ("conv-d1", "conv-d2"):
        with _agent_span(provider) as started:
            answer = await client.post("/v1/tool-calls", json=start_body(conversation_id), headers=AGENT)
        expire(db, answer.json()["operation"]["operation_id"])
        starts[conversation_id] = started.get_span_context()
    sweeper = DeadlineSweeper(pool, Wakeups(), distributed=True, tracer_provider=provider)
    assert len(await sweeper.sweep_once()) == 2
    settles = _named(exporter, SETTLE_SPAN)
    assert len(settles) == 2
    for span in settles:
        (link,) = span.links
        assert link.attributes is not None
        conversation_id = str(link.attributes["lineup.conversation_id"])
        assert link.context.span_id == starts[conversation_id].span_id
        row = _row(db, "SELECT traceparent FROM outbox WHERE conversation_id = %s", conversation_id)
        assert row["traceparent"] == _traceparent(span.context)


def _stored(db: Db, conversation_id: str, traceparent: str, tracestate: str | None) -> str:
    (queued,) = queue_results(db, conversation_id)
    db.execute(
        "UPDATE outbox SET traceparent = %s, tracestate = %s WHERE event_id = %s",
        (traceparent, tracestate, queued.event_id),
    )
    return queued.event_id


PRODUCER = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def test_each_attempt_is_a_send_span_linked_to_the_stored_context_and_the_agent_gets_its_context(
    database_url: str, db: Db, spans: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, exporter = spans
    secret = new_secret()
    event_id = _stored(db, "conv-send", PRODUCER, "rojo=00f067aa0ba902b7")
    failing = fail_first(1, ReceiverReply(500))
    with Receiver([secret], responder=failing) as agent:
        config = relay_config(database_url, agent.url, [secret])
        with running_relay(config, tracer_provider=provider):
            agent.wait_for_accepted({event_id})
            wait_until(lambda: len(_named(exporter, "send agent")) == 2)
        deliveries = [d for d in agent.deliveries if d.event_id == event_id]
        url = agent.url
    assert [d.reply.status for d in deliveries] == [500, 204]

    sends = sorted(_named(exporter, "send agent"), key=lambda s: s.start_time or 0)
    posts = {s.context.span_id: s for s in _named(exporter, "POST")}
    for number, (send, delivery) in enumerate(zip(sends, deliveries, strict=True), start=1):
        assert send.kind is SpanKind.PRODUCER
        assert send.parent is None  # a trace of its own; the producer is a link
        (link,) = send.links
        assert _traceparent(link.context) == PRODUCER
        assert link.context.trace_state.get("rojo") == "00f067aa0ba902b7"
        attributes = dict(send.attributes or {})
        assert attributes["messaging.system"] == "lineup.outbox"
        assert attributes["messaging.operation.type"] == "send"
        assert attributes["messaging.operation.name"] == "send"
        assert attributes["messaging.destination.name"] == "agent"
        assert attributes["messaging.message.id"] == event_id  # the same message on every attempt
        assert attributes["messaging.message.conversation_id"] == "conv-send"
        assert attributes["lineup.delivery.attempt"] == number
        assert attributes["http.response.status_code"] == delivery.reply.status
        assert (attributes.get("error.type"), send.status.is_ok) == (
            ("500", False) if number == 1 else (None, True)
        )
        # The POST: the send span's child, whose context the Agent received.
        match = TRACEPARENT.fullmatch(delivery.headers["traceparent"])
        assert match is not None
        post = posts[int(match.group(2), 16)]
        assert int(match.group(1), 16) == send.context.trace_id == post.context.trace_id
        assert post.parent is not None and post.parent.span_id == send.context.span_id
        assert post.kind is SpanKind.CLIENT
        http = dict(post.attributes or {})
        assert http["http.request.method"] == "POST"
        assert http["http.response.status_code"] == delivery.reply.status
        assert http["url.full"] == url
        assert http.get("http.request.resend_count") == (None if number == 1 else number - 1)
        # A tracestate belongs to its trace: the producer's stays on the link, the attempt's is empty.
        assert "tracestate" not in delivery.headers
        assert delivery.verified_by == (0,)  # the signature is the same with the trace headers


def test_a_relay_that_does_not_trace_sends_the_stored_context_unchanged(database_url: str, db: Db) -> None:
    secret = new_secret()
    traced = _stored(db, "conv-fwd", PRODUCER, "rojo=00f067aa0ba902b7")
    (untraced,) = (q.event_id for q in queue_results(db, "conv-none"))
    malformed = _stored(db, "conv-bad", "00-xyz\r\nx-injected: 1", None)
    with (
        Receiver([secret]) as agent,
        running_relay(relay_config(database_url, agent.url, [secret]), tracer_provider=NoOpTracerProvider()),
    ):
        deliveries = {d.event_id: d for d in agent.wait_for_accepted({traced, untraced, malformed})}
    assert deliveries[traced].headers["traceparent"] == PRODUCER
    assert deliveries[traced].headers["tracestate"] == "rojo=00f067aa0ba902b7"
    for event_id in (untraced, malformed):
        assert "traceparent" not in deliveries[event_id].headers
        assert "tracestate" not in deliveries[event_id].headers
        assert "x-injected" not in deliveries[event_id].headers

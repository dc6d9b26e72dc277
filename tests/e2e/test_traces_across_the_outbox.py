"""One trace (or a linked pair) from the Agent's call to the Agent's webhook, with real processes: a
``python -m relay`` (and ``python -m service serve``) exporting over OTLP/HTTP to a receiver of the
test's own, which decodes the real protobuf (tests/support/otlp_receiver.py), and the Agent's
webhook endpoint (harness.receiver) reading the ``traceparent`` each delivery carries."""

from __future__ import annotations

import re
import signal
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from harness.calls import interrupt_body, start_body
from harness.processes import RelayProcess, free_port
from harness.receiver import Receiver, Reply, fail_first, new_secret
from tests.conftest import AGENT, ServiceProcess
from tests.support.otlp_receiver import OtlpReceiver, ReceivedSpan
from tests.support.outbox import queue_results, wait_until

pytestmark = pytest.mark.e2e

Db = psycopg.Connection[dict[str, Any]]

TRACEPARENT = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")
PRODUCER = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def _parts(traceparent: str) -> tuple[str, str]:
    match = TRACEPARENT.fullmatch(traceparent)
    assert match is not None, traceparent
    return match.group(1), match.group(2)


@pytest.fixture
def collector() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as receiver:
        yield receiver


@pytest.fixture
def relay_for(database_url: str, tmp_path: Path, collector: OtlpReceiver) -> Iterator[Any]:
    """``relay_for(agent, relay_id, **env)``: a traced relay process delivering to ``agent``."""
    started: list[RelayProcess] = []

    def start(agent: Receiver, secret: str, relay_id: str = "relay-traced", **env: str) -> RelayProcess:
        relay = RelayProcess(
            database_url,
            agent.url,
            secret,
            tmp_path / f"{relay_id}-{len(started)}.log",
            {
                "RELAY_ID": relay_id,
                "RELAY_METRICS_HOST": "127.0.0.1",
                "RELAY_METRICS_PORT": str(free_port()),
                "RELAY_TIMEOUT_SECONDS": "5",
                "RELAY_LEASE_SECONDS": "30",
                "RELAY_BACKOFF_BASE_SECONDS": "0.05",
                "RELAY_BACKOFF_MAX_SECONDS": "0.2",
                "RELAY_POLL_INTERVAL_SECONDS": "0.2",
                **collector.environment(),
                **env,
            },
        ).start()
        started.append(relay)
        relay.wait_ready()
        return relay

    yield start
    for relay in started:
        if relay.running():
            relay.kill()


def _sends(collector: OtlpReceiver, event_id: str) -> Callable[[int], list[ReceivedSpan]]:
    def wait(count: int) -> list[ReceivedSpan]:
        def ours(spans: list[ReceivedSpan]) -> list[ReceivedSpan]:
            return [
                s
                for s in spans
                if s.name == "send agent" and s.attributes.get("messaging.message.id") == event_id
            ]

        collector.wait_for(lambda spans: len(ours(spans)) >= count)
        return sorted(ours(collector.spans), key=lambda s: s.attributes["lineup.delivery.attempt"])

    return wait


def _stored(db: Db, conversation_id: str) -> str:
    (queued,) = queue_results(db, conversation_id)
    db.execute("UPDATE outbox SET traceparent = %s WHERE event_id = %s", (PRODUCER, queued.event_id))
    return queued.event_id


def test_a_retried_delivery_is_two_send_spans_of_one_message_each_linked_to_the_producer(
    db: Db, collector: OtlpReceiver, relay_for: Any
) -> None:
    secret = new_secret()
    event_id = _stored(db, "conv-e2e-retry")
    with Receiver([secret], responder=fail_first(1, Reply(500))) as agent:
        relay = relay_for(agent, secret)
        agent.wait_for_accepted({event_id})
        deliveries = [d for d in agent.snapshot() if d.event_id == event_id]
        first, second = _sends(collector, event_id)(2)
        assert relay.stop() == 0
    assert [d.reply.status for d in deliveries] == [500, 204]
    for number, (send, delivery) in enumerate(zip((first, second), deliveries, strict=True), start=1):
        assert send.service == "lineup-relay"
        assert send.kind == "PRODUCER"
        assert send.parent_span_id == ""
        assert send.attributes["lineup.delivery.attempt"] == number
        assert send.attributes["messaging.system"] == "lineup.outbox"
        assert send.attributes["messaging.operation.type"] == "send"
        assert send.attributes["messaging.destination.name"] == "agent"
        assert send.attributes["http.response.status_code"] == delivery.reply.status
        assert send.status == ("ERROR" if number == 1 else "UNSET")
        (link,) = send.links
        assert f"00-{link.trace_id}-{link.span_id}-01" == PRODUCER
        # The Agent got the attempt's POST span, the send span's child, as its parent.
        trace_id, parent_id = _parts(delivery.headers["traceparent"])
        (post,) = [s for s in collector.named("POST") if s.span_id == parent_id]
        assert trace_id == send.trace_id == post.trace_id
        assert post.parent_span_id == send.span_id
        assert post.kind == "CLIENT"
        assert post.attributes["http.response.status_code"] == delivery.reply.status


def test_a_redelivery_after_a_relay_was_killed_mid_attempt_is_a_further_attempt_of_the_message(
    db: Db, collector: OtlpReceiver, relay_for: Any
) -> None:
    secret = new_secret()
    event_id = _stored(db, "conv-e2e-kill")
    # The first POST is answered only after the relay is gone; the next one at once.
    slow_then_fast = fail_first(1, Reply(204, delay=3.0))
    with Receiver([secret], responder=slow_then_fast) as agent:
        doomed = relay_for(agent, secret, "relay-doomed")
        agent.wait_until(lambda deliveries: any(d.event_id == event_id for d in deliveries))
        assert doomed.process is not None
        doomed.process.send_signal(signal.SIGKILL)
        doomed.process.wait()
        relay_for(agent, secret, "relay-doomed")  # the same id: its leases are handed back at once
        wait_until(lambda: len([d for d in agent.snapshot() if d.event_id == event_id]) >= 2, timeout=20)
        (send,) = _sends(collector, event_id)(1)  # the killed attempt's span was never exported
    deliveries = [d for d in agent.snapshot() if d.event_id == event_id]
    assert send.attributes["lineup.delivery.attempt"] == 2
    assert send.attributes["messaging.message.id"] == deliveries[1].headers["webhook-id"] == event_id
    assert _parts(deliveries[1].headers["traceparent"])[0] == send.trace_id
    assert _parts(deliveries[0].headers["traceparent"])[0] != send.trace_id  # each attempt its trace
    (link,) = send.links
    assert f"00-{link.trace_id}-{link.span_id}-01" == PRODUCER


def _client_traceparent() -> tuple[str, str]:
    trace_id = uuid.uuid4().hex
    return trace_id, f"00-{trace_id}-{uuid.uuid4().hex[:16]}-01"


def test_from_the_agents_call_to_the_agents_webhook(
    database_url: str, db: Db, tmp_path: Path, collector: OtlpReceiver, relay_for: Any
) -> None:
    secret = new_secret()
    service = ServiceProcess(database_url, tmp_path, **collector.environment()).start()
    try:
        service.wait_ready()
        with Receiver([secret]) as agent:
            relay_for(agent, secret)
            url = f"{service.base_url}/v1/tool-calls"

            # A period left to its deadline: the sweeper's settle links to the start call.
            started_trace, started_parent = _client_traceparent()
            answer = httpx.post(
                url,
                json=start_body("conv-e2e-deadline", duration_seconds=1),
                headers={**AGENT, "traceparent": started_parent},
            )
            assert answer.status_code == 202, answer.text
            call = db.execute(
                "SELECT traceparent FROM tool_calls WHERE conversation_id = 'conv-e2e-deadline'"
            ).fetchone()
            assert call is not None and _parts(call["traceparent"])[0] == started_trace
            (deadline_event,) = [d.event_id for d in agent.wait_until(lambda ds: len(ds) >= 1, timeout=20)]
            collector.wait_for(lambda spans: any(s.name == "settle deadlines" for s in spans))
            (settle,) = collector.named("settle deadlines")
            assert settle.service == "lineup-serve"
            (start_link,) = settle.links
            assert (start_link.trace_id, start_link.span_id) == _parts(call["traceparent"])
            (deadline_send,) = _sends(collector, deadline_event)(1)
            (settle_link,) = deadline_send.links
            assert (settle_link.trace_id, settle_link.span_id) == (settle.trace_id, settle.span_id)

            # An interrupt: the send span links to the interrupting call.
            httpx.post(url, json=start_body("conv-e2e-interrupt"), headers=AGENT).raise_for_status()
            interrupt_trace, interrupt_parent = _client_traceparent()
            answer = httpx.post(
                url,
                json=interrupt_body("conv-e2e-interrupt"),
                headers={**AGENT, "traceparent": interrupt_parent},
            )
            assert answer.json()["status"] == "interrupted"
            row = db.execute(
                "SELECT event_id::text AS event_id, traceparent FROM outbox"
                " WHERE conversation_id = 'conv-e2e-interrupt'"
            ).fetchone()
            assert row is not None and _parts(row["traceparent"])[0] == interrupt_trace
            (delivery,) = [
                d for d in agent.wait_for_accepted({row["event_id"]}) if d.event_id == row["event_id"]
            ]
            (send,) = _sends(collector, row["event_id"])(1)
            (link,) = send.links
            assert (link.trace_id, link.span_id) == _parts(row["traceparent"])
            assert _parts(delivery.headers["traceparent"])[0] == send.trace_id
    finally:
        service.stop()

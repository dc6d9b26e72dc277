"""One signed POST of an outbox row to the Agent, over the relay's pooled keep-alive connections
(``relay.webhook_client``).

The request is the row's stored payload, byte for byte the same on every attempt, with the fixed
headers (``user-agent``, ``content-type``), the Standard Webhooks headers (``relay.signing``) and
the ``Idempotency-Key``, and the trace context (``traceparent``, ``tracestate``; not signed). Transport
failures are recorded under a small vocabulary of their own: ``Timeout``, ``ConnectError``,
``RemoteProtocolError``, ``ReadError`` (and ``RelayShutdown`` when the relay stops during an
attempt).

Traces (docs/tracing-outbox.md). When the relay traces (``python -m relay`` installs the
OpenTelemetry SDK when the ``OTEL_*`` variables ask: ``service.telemetry``), each attempt is two
spans after the semantic conventions: the message's ``send`` span (PRODUCER, ``send agent``: the
messaging conventions' ``{operation} {destination}``) with a link to the context stored with the
row — the call, or the deadline sweeper's settle, that produced it, which stands for the message's
``create`` — and, its child, the POST's HTTP client span (CLIENT, ``POST``). The Agent receives the
POST span's context in ``traceparent``/``tracestate``: its server span joins the attempt's trace,
the producing call one link away. Every attempt of a row — a retry, a redelivery after a relay
crashed or its lease ran out — is another ``send`` span of the same ``messaging.message.id`` (the
row's event id, the ``webhook-id``), numbered by ``lineup.delivery.attempt``. A relay that does not
trace sends the stored context unchanged (when it is well formed), so an Agent that traces still
joins the producing call's trace, at no cost to the relay.
"""

from __future__ import annotations

import asyncio
import re
import string
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import quote

from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, StatusCode, Tracer, set_span_in_context

from relay.claims import Claim
from relay.clock import ClockSkew, database_time
from relay.config import redacted
from relay.policy import AttemptResult
from relay.signing import Signer
from relay.webhook_client import EXCERPT_BYTES, WebhookClient
from service.domain.delivery import AGENT_ENDPOINT
from service.trace_context import carrier, forwardable, header_lines, link

__all__ = ["EXCERPT_BYTES", "Attempt", "Deliverer", "idempotency_key"]

USER_AGENT = "lineup-relay/0.1"
# Printable ASCII but the space and "%": what an Idempotency-Key carries as it is.
_HEADER_SAFE = "".join(c for c in string.printable if c.isprintable() and c not in " %")
_ALL_SAFE = re.compile("[" + re.escape(_HEADER_SAFE) + "]*")


def idempotency_key(tool_call_id: str) -> str:
    """The ``Idempotency-Key`` of a row: its tool call id, which the service's id rule makes
    header-safe. A row recorded under the earlier rule (a space, a line break, non-ASCII) gets
    those bytes percent-encoded (UTF-8) rather than a header that fails on every attempt and holds
    back its conversation; the body carries the id unchanged."""
    if _ALL_SAFE.fullmatch(tool_call_id):
        return tool_call_id
    return quote(tool_call_id, safe=_HEADER_SAFE)


@dataclass(frozen=True, slots=True)
class Attempt:
    started_at: datetime
    duration_ms: int
    result: AttemptResult


#: Called once per attempt, from the event loop, when it has ended.
Delivered = Callable[[Claim, Attempt], None]


class Deliverer:
    def __init__(
        self,
        url: str,
        signer: Signer,
        *,
        timeout: float,
        concurrency: int,
        lease_seconds: float,
        skew: ClockSkew | None = None,
        tracer: Tracer | None = None,
        destination: str = AGENT_ENDPOINT,
    ) -> None:
        self._signer = signer
        self._lease_seconds = lease_seconds
        self._skew = skew
        self.client = WebhookClient(
            url,
            timeout=timeout,
            limit=concurrency,
            headers={"user-agent": USER_AGENT, "content-type": "application/json"},
        )
        #: None: the relay does not trace (``service.trace_context.recording_tracer``).
        self.tracer = tracer
        self._spans = _Spans(tracer, url, destination, self.client) if tracer is not None else None

    def headers(self, claim: Claim, timestamp: int) -> bytes:
        """The request's own headers, as HTTP/1.1 lines: the signature's three and the key."""
        return self._signer.header_lines(str(claim.event_id), timestamp, claim.body) + (
            b"idempotency-key: %s\r\n" % idempotency_key(claim.tool_call_id).encode("ascii")
        )

    def send(self, claim: Claim, delivered: Delivered) -> None:
        """POST the row's stored payload; ``delivered`` is called with the attempt once it ends. It
        is stamped with the database's clock (``relay.clock``), whatever the host's says."""
        now = database_time(claim, self._lease_seconds)
        if self._skew is not None:
            self._skew.observe(now, time.time())
        started_at = datetime.fromtimestamp(now, UTC)
        headers = self.headers(claim, int(now))
        spans = self._spans
        if spans is None:
            stored = forwardable(claim.traceparent, claim.tracestate)
            if stored is not None:
                headers += header_lines({"traceparent": stored[0], "tracestate": stored[1] or ""})

            def done(result: AttemptResult, seconds: float) -> None:
                delivered(claim, Attempt(started_at, round(seconds * 1000), result))

            self.client.post(headers, claim.body, done)
            return

        send, post = spans.start(claim)

        def done_traced(result: AttemptResult, seconds: float) -> None:
            _Spans.end(send, post, result)
            delivered(claim, Attempt(started_at, round(seconds * 1000), result))

        self.client.post(headers + header_lines(carrier(post)), claim.body, done_traced)

    async def attempt(self, claim: Claim) -> Attempt:
        """``send`` as a coroutine: the attempt once it has ended."""
        ended: asyncio.Future[Attempt] = asyncio.get_running_loop().create_future()

        def delivered(_: Claim, attempt: Attempt) -> None:
            if not ended.done():
                ended.set_result(attempt)

        self.send(claim, delivered)
        return await ended

    def abort(self, reason: str) -> None:
        """End every attempt in flight as ``RelayShutdown``."""
        self.client.abort(reason)

    async def aclose(self) -> None:
        await self.client.aclose()


class _Spans:
    """An attempt's two spans: the message's ``send`` (PRODUCER) and its POST (CLIENT)."""

    __slots__ = ("_http", "_message", "_tracer")

    def __init__(self, tracer: Tracer, url: str, destination: str, client: WebhookClient) -> None:
        self._tracer = tracer
        server: dict[str, str | int] = {"server.address": client.host, "server.port": client.port}
        # What every attempt says alike (messaging and HTTP client conventions).
        self._message: dict[str, str | int] = {
            "messaging.system": MESSAGING_SYSTEM,
            "messaging.operation.type": "send",
            "messaging.operation.name": "send",
            "messaging.destination.name": destination,
            **server,
        }
        self._http: dict[str, str | int] = {
            "http.request.method": "POST",
            "url.full": redacted(url),  # no user, password, query or fragment: they may be credentials
            "network.protocol.version": "1.1",
            **server,
        }

    def start(self, claim: Claim) -> tuple[Span, Span]:
        stored = link(claim.traceparent, claim.tracestate)
        attributes: dict[str, str | int | bool] = {
            **self._message,
            "messaging.message.id": str(claim.event_id),
            "messaging.message.conversation_id": claim.conversation_id,
            "messaging.message.body.size": len(claim.body),
            "lineup.delivery.attempt": claim.attempts,
            "lineup.tool_call_id": claim.tool_call_id,
        }
        if claim.probe:
            attributes["lineup.delivery.probe"] = True
        send = self._tracer.start_span(
            f"send {attributes['messaging.destination.name']}",
            context=_ROOT,
            kind=SpanKind.PRODUCER,
            links=None if stored is None else [stored],
            attributes=attributes,
        )
        http: dict[str, str | int] = dict(self._http)
        if claim.attempts > 1:
            http["http.request.resend_count"] = claim.attempts - 1
        post = self._tracer.start_span(
            "POST", context=set_span_in_context(send, _ROOT), kind=SpanKind.CLIENT, attributes=http
        )
        return send, post

    @staticmethod
    def end(send: Span, post: Span, result: AttemptResult) -> None:
        """End both with what the attempt came to: its status, or the class of its failure."""
        status = result.status_code
        error = result.error_class
        if status is not None:
            for span in (post, send):
                span.set_attribute("http.response.status_code", status)
            if status >= 400:
                error = str(status)
        if error is not None:
            for span in (post, send):
                span.set_attribute("error.type", error)
                span.set_status(StatusCode.ERROR, error)
        post.end()
        send.end()


#: ``messaging.system`` of the delivery spans: the outbox is the messaging system.
MESSAGING_SYSTEM = "lineup.outbox"
# Every attempt starts a trace of its own (the producing call is a link, not a parent), whatever
# context is current in the relay's loop.
_ROOT = Context()

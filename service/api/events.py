"""``GET /v1/host/conversations/{cid}/events``: projection changes as Server-Sent Events.

Each event has ``id`` = its ``event_seq``, ``event`` = its kind (operation, workspace, message,
interaction) and ``data`` = the JSON payload. A client that reconnects with ``Last-Event-ID`` (or
``?after=<seq>``) gets everything after it; without one the stream starts at the present.
"""

from __future__ import annotations

import asyncio
import json
import weakref
from collections.abc import AsyncIterator
from typing import Annotated, Any

from litestar import Controller, Request, get
from litestar.params import HeaderParameter, QueryParameter
from litestar.response import ServerSentEvent
from litestar.response.sse import ServerSentEventMessage
from opentelemetry.trace import Span, SpanKind
from psycopg.rows import DictRow

from service.api import inputs
from service.api.answers import refusals
from service.api.auth import HOST_SECURITY, principal_of, require
from service.api.host_scope import where
from service.api.inputs import SEQUENCE, IdPath
from service.host_streams import HostStreams, Stream
from service.telemetry import TRACING, tracer

KEEPALIVE_SECONDS = 15.0


async def _stream(
    feeds: HostStreams, stream: Stream, after: int | None, stop: asyncio.Event
) -> AsyncIterator[ServerSentEventMessage]:
    try:
        start = after if after is not None else await feeds.position(stream)
        feeds.anchor(stream, start)
        last = start
        yield ServerSentEventMessage(data=None, comment="stream open", retry=2000)
        if after is not None:
            async for row in feeds.backlog(stream.conversation_id, after):
                if _session_over(stream):
                    break
                last = int(row["event_seq"])
                yield _message(row)
        while not stop.is_set() and not stream.lagged and not _session_over(stream):
            fed = await _next(stream, stop, _wait_seconds(stream))
            if fed is None or _session_over(stream):
                if not stop.is_set() and not _session_over(stream):
                    yield ServerSentEventMessage(data=None, comment="keepalive")
                continue
            if int(fed["event_seq"]) > last:
                last = int(fed["event_seq"])
                span = _ending_span(fed, stream.conversation_id) if TRACING.on else None
                yield _message(fed)
                if span is not None:  # sent: the stream asked for the next message
                    span.end()
        if stream.ended is not None:
            # The person's session is over: say so, and end (a reconnect is answered 401).
            reason = json.dumps({"reason": stream.ended}, separators=(",", ":"))
            yield ServerSentEventMessage(data=reason, event="session_ended")
    finally:
        feeds.close(stream)


def _session_over(stream: Stream) -> bool:
    """The stream's session ended here or elsewhere, or its expiry has come."""
    expires_at = stream.expires_at
    if stream.ended is None and expires_at is not None and asyncio.get_running_loop().time() >= expires_at:
        stream.end("expired")
    return stream.ended is not None


def _wait_seconds(stream: Stream) -> float:
    """Until the next keep-alive, or the session's expiry if that comes first."""
    if stream.expires_at is None:
        return KEEPALIVE_SECONDS
    left = stream.expires_at - asyncio.get_running_loop().time()
    return max(0.0, min(KEEPALIVE_SECONDS, left))


def _ending_span(row: DictRow, conversation_id: str) -> Span | None:
    """The span of an operation's ending pushed to the person who waits for it (an ``operation``
    event with ``finalized_at``): a PRODUCER span under the stream's HTTP span, from the moment the
    ending reached this stream until it was written to the connection. None for any other event."""
    payload = row["payload"]
    if row["kind"] != "operation" or not isinstance(payload, dict) or payload.get("finalized_at") is None:
        return None
    attributes: dict[str, str | int] = {
        "lineup.conversation_id": conversation_id,
        "lineup.operation_id": str(payload.get("operation_id", "")),
        "lineup.operation.state": str(payload.get("state", "")),
        "lineup.operation.reason": str(payload.get("reason") or ""),
        "lineup.tool_call_id": str(payload.get("tool_call_id") or ""),
        "lineup.event_seq": int(row["event_seq"]),
    }
    # Not made current: the generator yields between start and end, and a context attached here
    # would leak into whatever runs between.
    return tracer().start_span("push operation", kind=SpanKind.PRODUCER, attributes=attributes)


def _message(row: DictRow) -> ServerSentEventMessage:
    return ServerSentEventMessage(
        data=json.dumps(row["payload"], separators=(",", ":")), event=row["kind"], id=int(row["event_seq"])
    )


async def _next(stream: Stream, stop: asyncio.Event, seconds: float) -> DictRow | None:
    """The stream's next row, or None when only the keep-alive time passed, on shutdown, or when
    the stream's session ends."""
    if not stream.rows.empty():
        return stream.rows.get_nowait()
    getting = asyncio.ensure_future(stream.rows.get())
    stopping = asyncio.ensure_future(stop.wait())
    ending = asyncio.ensure_future(stream.woken.wait())
    try:
        await asyncio.wait({getting, stopping, ending}, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
        ending.cancel()
        if not getting.done():
            getting.cancel()
    return getting.result() if getting.done() and not getting.cancelled() else None


class HostEventsController(Controller):
    path = "/v1/host"
    tags = ["Host API"]
    security = HOST_SECURITY
    before_request = require("host")

    @get(
        "/conversations/{conversation_id:str}/events",
        summary="Projection changes as a Server-Sent Events stream (a person's ends with their session)",
        response_description="Server-Sent Events: `event` is operation, workspace, message or interaction, "
        "`id` its sequence, `data` the JSON payload. Resume with Last-Event-ID (or ?after=). A person's "
        'stream ends with `event: session_ended` (`data` `{"reason"}`: revoked, ended or expired) when '
        "their session does: at once on the replica that ended it, within SSE_SESSION_CHECK_SECONDS on "
        "the others, at its expiry.",
        media_type="text/event-stream",
        responses=refusals(
            {422: ("invalid_request",), 429: ("too_many_requests",), 503: ("unavailable",)}, path=True
        ),
        opt=where("path"),
    )
    async def events(
        self,
        conversation_id: IdPath,
        request: Request[Any, Any, Any],
        after: Annotated[str | None, QueryParameter(name="after", schema_extra=SEQUENCE)] = None,
        last_event_id: Annotated[
            str | None, HeaderParameter(name="Last-Event-ID", schema_extra=SEQUENCE)
        ] = None,
    ) -> ServerSentEvent:
        conversation_id = inputs.conversation_id(conversation_id)
        after_event = inputs.event_sequence(last_event_id or after)
        feeds: HostStreams = request.app.state.host_streams
        stop: asyncio.Event = request.app.state.stopping
        principal = principal_of(request)
        # 429/503 past the bounds; a person's stream ends with their session.
        stream = feeds.open(conversation_id, principal.session_id, principal.expires_in)
        messages = _stream(feeds, stream, after_event, stop)
        # A stream whose response never started still gives its place back.
        weakref.finalize(messages, feeds.close, stream)
        return ServerSentEvent(
            messages,
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

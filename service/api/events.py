"""``GET /v1/host/conversations/{cid}/events``: projection changes as Server-Sent Events.

Each event has ``id`` = its ``event_seq``, ``event`` = its kind (operation, workspace, message,
interaction) and ``data`` = the JSON payload. A client that reconnects with ``Last-Event-ID`` (or
``?after=<seq>``) gets everything after it; without one the stream starts at the present.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Annotated, Any

from litestar import Controller, Request, get
from litestar.params import HeaderParameter, QueryParameter
from litestar.response import ServerSentEvent
from litestar.response.sse import ServerSentEventMessage

from service.api import inputs
from service.api.answers import refusals
from service.api.auth import HOST_SECURITY, require
from service.api.inputs import SEQUENCE, IdPath
from service.api.state import runtime_of
from service.db import projections as proj_db
from service.projections import ProjectionHub
from service.use_cases.runtime import Runtime

KEEPALIVE_SECONDS = 15.0


async def _stream(
    runtime: Runtime, hub: ProjectionHub, conversation_id: str, after: int | None, stop: asyncio.Event
) -> AsyncIterator[ServerSentEventMessage]:
    with hub.subscribe(conversation_id) as wake:
        async with runtime.pool.connection() as conn:
            last = after if after is not None else await proj_db.latest(conn, conversation_id)
            await conn.rollback()
        yield ServerSentEventMessage(data=None, comment="stream open", retry=2000)
        while not stop.is_set():
            wake.clear()
            async with runtime.pool.connection() as conn:
                rows = await proj_db.after(conn, conversation_id, last)
                await conn.rollback()
            for row in rows:
                last = int(row["event_seq"])
                yield ServerSentEventMessage(
                    data=json.dumps(row["payload"], separators=(",", ":")),
                    event=row["kind"],
                    id=last,
                )
            if rows:
                continue
            if not await _woken(wake, stop, KEEPALIVE_SECONDS):
                yield ServerSentEventMessage(data=None, comment="keepalive")


async def _woken(wake: asyncio.Event, stop: asyncio.Event, seconds: float) -> bool:
    """Wait for a notification or for shutdown; False when only the keep-alive time passed."""
    waiters = {asyncio.ensure_future(wake.wait()), asyncio.ensure_future(stop.wait())}
    try:
        done, _ = await asyncio.wait(waiters, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
    return bool(done)


class HostEventsController(Controller):
    path = "/v1/host"
    tags = ["Host API"]
    security = HOST_SECURITY
    before_request = require("host")

    @get(
        "/conversations/{conversation_id:str}/events",
        summary="Projection changes as a Server-Sent Events stream (it never ends)",
        response_description="Server-Sent Events: `event` is operation, workspace, message or interaction, "
        "`id` its sequence, `data` the JSON payload. Resume with Last-Event-ID (or ?after=).",
        media_type="text/event-stream",
        responses=refusals({422: ("invalid_request",)}, path=True),
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
        runtime = runtime_of(request)
        hub: ProjectionHub = request.app.state.projections
        stop: asyncio.Event = request.app.state.stopping
        return ServerSentEvent(
            _stream(runtime, hub, conversation_id, after_event, stop),
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

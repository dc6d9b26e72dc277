"""A short operation answered in its own call, with progress.

An operation's ending normally arrives later than its call: as a task, through ``operation_status``
or by the webhook. A Tool whose operations are short may declare ``operation.await_in_call_seconds``
in its manifest: then an MCP ``tools/call`` that opens (or replays) an operation ending within that
many seconds, from a client that does not take it as a task, waits for the ending and answers it —
the very ``result`` object the relay delivers (``structuredContent``), with the call's
``tool_call_id`` and the ``operation_id`` so that an agent that also gets the webhook counts it once.
A request that carries ``_meta.progressToken`` hears ``notifications/progress`` while it waits: the
seconds elapsed of the operation's duration (``total``), the same clock as its deadline, increasing
with each notification and ending at the seconds it ran. A longer operation, or a tool that does not
declare it, answers the acceptance as always.

The wait is the tasks' (``service.mcp.tasks.until_final``): woken by the conversation's after-commit
wake-ups and at the deadline, where the read settles the operation — never a sleep loop deciding
anything. Each answer is one JSON body (``service.mcp.endpoint``), so the notifications ride the
session's standalone stream (its open ``GET``), as an elicitation does; a client without one hears
none and still gets the ending. A client that goes away leaves the operation as it is: it ends at its
deadline and the relay delivers it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import msgspec
import structlog
from mcp.server.context import ServerRequestContext

from service.clock import CLOCK
from service.mcp.binding import HTTP_STATUS, TOOL_CALL_ID
from service.mcp.tasks import settled
from service.mcp.tools import Answer
from service.projection_hub import ProjectionHub
from service.use_cases.runtime import Runtime

log = structlog.get_logger("service.mcp")

Ctx = ServerRequestContext[Any, Any]

#: The longest time between two notifications; a short operation hears about four.
PROGRESS_INTERVAL_SECONDS = 1.0
OPERATION_ID = "io.lineup/operation_id"


def progress_token(params: Mapping[str, Any]) -> str | int | None:
    """The request's ``_meta.progressToken`` (a string or an integer), if it asked for progress."""
    meta = params.get("_meta")
    token = meta.get("progressToken") if isinstance(meta, dict) else None
    return token if isinstance(token, str | int) and not isinstance(token, bool) else None


def _epoch(timestamp: str) -> float:
    return datetime.fromisoformat(timestamp).timestamp()


def held(answer: Answer, within: int | None) -> bool:
    """Whether this call waits for its operation's ending: the Tool declares a wait, the call
    opened (or had opened) an operation, and it ends within the wait by the database's clock."""
    if within is None or answer.operation_id is None:
        return False
    return _epoch(answer.body["operation"]["ends_at"]) - CLOCK.now() <= within


class _Progress:
    """The notifications of one request: strictly increasing, never past the total."""

    def __init__(self, ctx: Ctx, token: str | int, started_at: str, total: int) -> None:
        self.ctx, self.token, self.total = ctx, token, float(total)
        self.started = _epoch(started_at)
        self.last = -1.0

    async def send(self, progress: float, message: str) -> None:
        progress = round(min(max(progress, 0.0), self.total), 3)
        if progress <= self.last:
            return
        self.last = progress
        try:
            await self.ctx.session.send_progress_notification(
                self.token, progress, total=self.total, message=message
            )
        except Exception as exc:  # a client gone away hears nothing more; the call goes on
            log.info("mcp_progress_not_sent", error=repr(exc))

    async def tick(self) -> None:
        interval = min(PROGRESS_INTERVAL_SECONDS, self.total / 4)
        while True:
            elapsed = CLOCK.now() - self.started
            await self.send(elapsed, f"{min(elapsed, self.total):.0f} of {self.total:.0f} s")
            await asyncio.sleep(interval)


def ended_result(answer: Answer, operation: dict[str, Any]) -> dict[str, Any]:
    """The call's result once its operation has ended: the relay's result object."""
    result = operation["result"]
    sentence = f"{answer.tool} ended {result['state']} ({result['reason']})."
    return {
        "content": [{"type": "text", "text": f"{sentence}\n{msgspec.json.encode(result).decode()}"}],
        "structuredContent": result,
        "isError": False,
        "_meta": {
            TOOL_CALL_ID: answer.binding.tool_call_id,
            OPERATION_ID: answer.operation_id,
            HTTP_STATUS: answer.status,
        },
    }


async def await_ending(
    rt: Runtime, hub: ProjectionHub, ctx: Ctx, answer: Answer, params: Mapping[str, Any]
) -> dict[str, Any]:
    """Wait for the call's operation to end (``held``), with progress when the request asked for
    it, and answer the ending."""
    assert answer.operation_id is not None
    opened = answer.body["operation"]
    known = None if answer.replayed else {**opened, "conversation_id": answer.binding.conversation_id}
    token = progress_token(params)
    progress = (
        None
        if token is None
        else _Progress(ctx, token, opened["started_at"], int(opened["duration_seconds"]))
    )
    ticking = None if progress is None else asyncio.create_task(progress.tick(), name="mcp-progress")
    try:
        operation = await settled(rt, hub, answer.operation_id, known)
    finally:
        if ticking is not None:
            ticking.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await ticking
    if progress is not None:
        ran = float(operation["result"].get("focused_seconds", progress.total))
        await progress.send(ran if operation["state"] != "completed" else progress.total, operation["state"])
    return ended_result(answer, operation)

"""``POST /v1/tool-calls``: route a call to its tool, exactly once per ``tool_call_id``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from psycopg import AsyncConnection, OperationalError, errors
from psycopg.rows import DictRow

from service.db import tool_calls as tc_db
from service.domain.errors import ApiError
from service.domain.idempotency import is_recorded
from service.metrics import TOOL_CALLS
from service.use_cases import interactions, pomodoro
from service.use_cases.runtime import Runtime
from service.use_cases.tool_call import ToolCall

Answer = tuple[int, dict[str, Any]]
log = structlog.get_logger("service.tool_calls")
Handler = Callable[[AsyncConnection[DictRow], Runtime, ToolCall], Awaitable[Answer]]

HANDLERS: dict[str, Handler] = {
    "pomodoro.start": pomodoro.start,
    "pomodoro.interrupt": pomodoro.interrupt,
    "interact.ask": interactions.ask,
}

# Transient outcomes of concurrency that a retry resolves: a same-id call that committed first
# (its answer is then replayed) or a deadlock the database broke.
# A broken connection is retried too: even if it broke during COMMIT, the retry finds the
# recorded answer and replays it, so nothing is decided twice.
_RETRYABLE = (
    errors.UniqueViolation,
    errors.DeadlockDetected,
    errors.SerializationFailure,
    OperationalError,
)


def _replay(recorded: DictRow, fingerprint: str) -> Answer:
    if recorded["fingerprint"] != fingerprint:
        raise ApiError(
            409,
            "idempotency_key_reused",
            "this tool_call_id was already used with a different request body",
        )
    return int(recorded["status_code"]), dict(recorded["response"])


async def call_tool(rt: Runtime, call: ToolCall, fingerprint: str) -> Answer:
    with structlog.contextvars.bound_contextvars(
        tool_call_id=call.tool_call_id, conversation_id=call.conversation_id, tool=call.tool
    ):
        status, body, replayed = await _call_tool(rt, call, fingerprint)
        outcome = str(body.get("status") or body.get("error"))
        TOOL_CALLS.labels(call.tool, "replayed" if replayed else outcome).inc()
        log.info("tool_call", status=status, outcome=outcome, replayed=replayed)
        return status, body


async def _call_tool(rt: Runtime, call: ToolCall, fingerprint: str) -> tuple[int, dict[str, Any], bool]:
    handler = HANDLERS.get(call.tool)
    if handler is None:
        raise ApiError(404, "unknown_tool", f"no tool named {call.tool!r}")
    for attempt in range(5):
        try:
            async with rt.transaction() as conn:
                recorded = await tc_db.get(conn, call.tool_call_id)
                if recorded is not None:
                    status, body = _replay(recorded, fingerprint)
                    return status, body, True
                status, body = await handler(conn, rt, call)
                if is_recorded(status):
                    await tc_db.record(
                        conn,
                        tool_call_id=call.tool_call_id,
                        conversation_id=call.conversation_id,
                        tool=call.tool,
                        fingerprint=fingerprint,
                        status_code=status,
                        response=body,
                    )
        except _RETRYABLE:
            if attempt == 4:
                raise
            continue
        return status, body, False
    raise AssertionError("unreachable")

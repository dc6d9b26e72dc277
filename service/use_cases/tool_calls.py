"""``POST /v1/tool-calls``: route a call to its tool, exactly once per ``tool_call_id``.

The whole call — idempotency lookup, workspace lock, decision, recorded answer, outbox row — is
one statement (``service.db.tool_calls``), so one round trip and one implicit transaction. Only
after it returns, committed, are the decision counted and logged and the waiters woken.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import msgspec
import structlog
from psycopg import OperationalError, errors

from service.db import tool_calls as tc_db
from service.domain.operations import POMODORO_SCOPE
from service.metrics import TOOL_CALL_SECONDS, TOOL_CALLS, observe_settled
from service.use_cases.runtime import Runtime

log = structlog.get_logger("service.tool_calls")

# Transient outcomes of concurrency that a retry resolves: a same-id call that committed first
# (its answer is then replayed) or a deadlock the database broke.
# A broken connection is retried too: even if it broke during the commit, the retry finds the
# recorded answer and replays it, so nothing is decided twice.
_RETRYABLE = (
    errors.UniqueViolation,
    errors.DeadlockDetected,
    errors.SerializationFailure,
    OperationalError,
)
ATTEMPTS = 5
# The tools ``call_tool`` in the database can run; a manifest declaring another stops ``serve``.
RUNNABLE_TOOLS = frozenset({"pomodoro.start", "pomodoro.interrupt", "interact.ask"})


@dataclass(frozen=True)
class ToolCall:
    """A validated Agent tool call (its arguments already checked against the tool's schema)."""

    tool_call_id: str
    conversation_id: str
    tool: str
    arguments: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ToolAnswer:
    status: int
    body: bytes  # the JSON text recorded in tool_calls: a replay sends the same bytes
    outcome: str  # the answer's status word or error code
    replayed: bool


def _state_schema_version(rt: Runtime) -> int:
    app = rt.registry.app(POMODORO_SCOPE)
    feature = app.instance_state if app is not None else None
    return feature.state_schema_version if feature is not None else 1


async def call_tool(rt: Runtime, call: ToolCall, fingerprint: str) -> ToolAnswer:
    """Decide (or replay) one validated tool call; the caller has checked the tool exists."""
    began = time.perf_counter()
    arguments = msgspec.json.encode(call.arguments).decode()
    for attempt in range(ATTEMPTS):
        try:
            async with rt.pool.connection() as conn:
                result = await tc_db.call(
                    conn,
                    tool_call_id=call.tool_call_id,
                    conversation_id=call.conversation_id,
                    tool=call.tool,
                    fingerprint=fingerprint,
                    arguments=arguments,
                    late_window_seconds=rt.settings.interrupt_late_window_seconds,
                    state_schema_version=_state_schema_version(rt),
                )
        except _RETRYABLE:
            if attempt == ATTEMPTS - 1:
                raise
            continue
        break
    # Committed: count, log and wake only now.
    settled = result.settled_event_id is not None
    if settled:
        with structlog.contextvars.bound_contextvars(tool_call_id=call.tool_call_id):
            observe_settled(
                [
                    {
                        "operation_id": result.settled_operation_id,
                        "conversation_id": call.conversation_id,
                        "state": result.settled_state,
                        "reason": result.settled_reason,
                        "lateness_ms": result.settled_lateness_ms,
                        "event_id": result.settled_event_id,
                    }
                ]
            )
    if not result.replayed and (settled or result.status_code == 202):
        rt.wakeups.committed((call.conversation_id,), outbox=settled, deadline=result.deadline)
    TOOL_CALLS.labels(call.tool, "replayed" if result.replayed else result.outcome).inc()
    TOOL_CALL_SECONDS.labels(call.tool).observe(time.perf_counter() - began)
    log.info(
        "tool_call",
        tool_call_id=call.tool_call_id,
        conversation_id=call.conversation_id,
        tool=call.tool,
        status=result.status_code,
        outcome=result.outcome,
        replayed=result.replayed,
    )
    return ToolAnswer(result.status_code, result.response.encode(), result.outcome, result.replayed)

"""``POST /v1/tool-calls``: route a call to its tool, exactly once per ``tool_call_id``.

The whole call — idempotency lookup, workspace lock, decision, recorded answer, outbox row — is
one statement (``service.db.tool_calls``), so one round trip and one implicit transaction; what it
makes known — counts, log lines, wake-ups — is released by its unit of work once it committed. The answer
is an outcome word and its body; the faces name the status.
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
from service.domain.outcomes import Outcome
from service.metrics import TOOL_CALL_SECONDS, TOOL_CALLS
from service.use_cases.runtime import Runtime
from service.use_cases.unit_of_work import UnitOfWork

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
# The database function that decides each Tool (service/db/sql/); a manifest declaring a Tool
# without one stops ``serve``.
DECISIONS = {
    "pomodoro.start": "pomodoro_start",
    "pomodoro.interrupt": "pomodoro_interrupt",
    "interact.ask": "interact_ask",
}
RUNNABLE_TOOLS = frozenset(DECISIONS)


@dataclass(frozen=True)
class ToolCall:
    """A validated Agent tool call (its arguments already checked against the tool's schema)."""

    tool_call_id: str
    conversation_id: str
    tool: str
    arguments: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ToolAnswer:
    outcome: Outcome  # the answer's status word or error code
    body: bytes  # the JSON text recorded in tool_calls: a replay sends the same bytes
    replayed: bool


def _context(rt: Runtime) -> str:
    """The settings the decision functions read (the late-interrupt window, the snapshot's schema)."""
    app = rt.registry.app(POMODORO_SCOPE)
    feature = app.instance_state if app is not None else None
    return msgspec.json.encode(
        {
            "late_window_seconds": rt.settings.interrupt_late_window_seconds,
            "state_schema_version": feature.state_schema_version if feature is not None else 1,
        }
    ).decode()


async def call_tool(rt: Runtime, call: ToolCall, fingerprint: str) -> ToolAnswer:
    """Decide (or replay) one validated tool call; the caller has checked the tool exists."""
    began = time.perf_counter()
    arguments = msgspec.json.encode(call.arguments).decode()
    for attempt in range(ATTEMPTS):
        try:
            async with rt.unit_of_work(transaction=False) as work:
                result = await tc_db.call(
                    work.conn,
                    tool_call_id=call.tool_call_id,
                    conversation_id=call.conversation_id,
                    tool=call.tool,
                    fingerprint=fingerprint,
                    arguments=arguments,
                    decide=DECISIONS[call.tool],
                    context=_context(rt),
                )
                answer = _noted(work, call, result, began)
        except _RETRYABLE:
            if attempt == ATTEMPTS - 1:
                raise
            continue
        return answer
    raise AssertionError("unreachable")


def _noted(work: UnitOfWork, call: ToolCall, result: tc_db.CallResult, began: float) -> ToolAnswer:
    """What the call makes known once committed: the operation it settled, the conversation it
    changed, the deadline it opened; its count, duration and log line."""
    outcome = Outcome(result.outcome)
    if result.settled_event_id is not None:
        work.observed(
            [
                {
                    "operation_id": result.settled_operation_id,
                    "conversation_id": call.conversation_id,
                    "tool_call_id": call.tool_call_id,
                    "state": result.settled_state,
                    "reason": result.settled_reason,
                    "lateness_ms": result.settled_lateness_ms,
                    "event_id": result.settled_event_id,
                }
            ]
        )
    if not result.replayed and outcome is Outcome.ACCEPTED:
        work.changed(call.conversation_id)
    if result.deadline is not None:
        work.opened(result.deadline)

    def report() -> None:
        TOOL_CALLS.labels(call.tool, "replayed" if result.replayed else outcome).inc()
        TOOL_CALL_SECONDS.labels(call.tool).observe(time.perf_counter() - began)
        log.info(
            "tool_call",
            tool_call_id=call.tool_call_id,
            conversation_id=call.conversation_id,
            tool=call.tool,
            outcome=outcome,
            replayed=result.replayed,
        )

    work.then(report)
    return ToolAnswer(outcome, result.response.encode(), result.replayed)

"""A tool call, exactly once per ``tool_call_id``, for both faces: ``POST /v1/tool-calls`` and MCP's
``tools/call`` build the same ``ToolCallRequest`` and this use case does everything else.

The checks before the decision happen here, once: the Tool is known, the arguments hold no U+0000
and match its input schema (integers sent as ``1500.0`` become integers); each refusal is counted
and records nothing, so the call may be corrected and retried under the same id. The call itself —
idempotency lookup, workspace lock, decision, recorded answer, outbox row — is one statement
(``service.db.tool_calls``), so one round trip and one implicit transaction; what it makes known —
counts, log lines, wake-ups — is released by its unit of work once it committed. The answer is an
outcome word, its kind and its body; the faces name the status (``service.http``).
"""

from __future__ import annotations

import math
import time
from typing import Any, NamedTuple

import msgspec
from psycopg import OperationalError, errors

from service.db import tool_calls as tc_db
from service.domain.errors import InvalidArguments, InvalidRequest, UnknownTool, WriteLimited
from service.domain.idempotency import fingerprint
from service.domain.outcomes import Accepted
from service.domain.text import nul_paths
from service.logging import Lines
from service.metrics import TOOL_CALLS, count_tool_call
from service.trace_context import carrier
from service.use_cases import callers
from service.use_cases.runtime import Runtime
from service.use_cases.unit_of_work import UnitOfWork

log = Lines("service.tool_calls")

# Transient outcomes of concurrency that a retry resolves: a same-id call that committed first
# (its answer is then replayed) or a deadlock the database broke.
# A broken connection is retried too: even if it broke during the commit, the retry finds the
# recorded answer and replays it, so nothing is decided twice. Retries end once the call has
# waited DB_UNAVAILABLE_AFTER_SECONDS (a checkout that found no connection has waited that long
# itself): its last error is then the caller's 503 database_unavailable, never a longer hang.
_CONCURRENCY = (errors.UniqueViolation, errors.DeadlockDetected, errors.SerializationFailure)
_RETRYABLE = (*_CONCURRENCY, OperationalError)
ATTEMPTS = 5


class ToolCallRequest(NamedTuple):
    """A tool call as a face received it (REST's body; MCP's name, arguments and ``_meta``). Named
    tuples here, made on every call: one tuple at once, where a frozen dataclass sets each field
    through ``object.__setattr__``."""

    tool_call_id: str
    conversation_id: str
    tool: str
    arguments: Any
    # What the client gave in MCP's input rounds (``service.mcp.input_required``), by key: passed to
    # the decision in ``p_context.input``. Not part of the body: a replay answers what was decided.
    input: dict[str, Any] | None = None

    def body(self) -> dict[str, Any]:
        """The REST body it stands for: what the idempotency fingerprint is taken of, so the same
        ``tool_call_id`` answers the same over either face."""
        return {
            "tool_call_id": self.tool_call_id,
            "conversation_id": self.conversation_id,
            "tool": self.tool,
            "arguments": self.arguments,
        }


class ToolAnswer(NamedTuple):
    tool: str
    outcome: str  # the answer's status word or error code
    kind: type  # Accepted, Answered, or the kind of refusal (service.domain)
    body: bytes  # the JSON text recorded in tool_calls: a replay sends the same bytes
    replayed: bool


def checked(rt: Runtime, request: ToolCallRequest) -> dict[str, Any]:
    """The arguments as the decision takes them, or the refusal (counted, nothing recorded)."""
    spec = rt.registry.tool(request.tool)
    if spec is None:
        TOOL_CALLS.labels("unknown", "unknown_tool").inc()
        raise UnknownTool(f"no tool named {request.tool!r}")
    arguments = {} if request.arguments is None else request.arguments
    if isinstance(arguments, dict) and (nul := nul_paths(arguments, "arguments")):
        TOOL_CALLS.labels(request.tool, "invalid_request").inc()
        raise InvalidRequest(
            "strings may not contain U+0000", details=[{"path": p, "message": "contains U+0000"} for p in nul]
        )
    if details := spec.validate_arguments(arguments):
        TOOL_CALLS.labels(request.tool, "invalid_arguments").inc()
        raise InvalidArguments(
            f"the arguments do not match the input schema of {request.tool}",
            details=[d.as_dict() for d in details],
        )
    return spec.normalized(arguments)


async def call_tool(rt: Runtime, request: ToolCallRequest) -> ToolAnswer:
    """Check, then decide (or replay) one tool call."""
    began = time.perf_counter()
    arguments = msgspec.json.encode(checked(rt, request)).decode()
    runner = rt.registry.runner(request.tool)
    digest = fingerprint(request.body())
    decide, context = runner.decide, rt.context_of(request.tool)
    caller = callers.current.get()
    spend = callers.allowance(rt.settings, caller, request.conversation_id)
    traced = carrier()  # the span the call is made in (service.trace_context); None: untraced
    # (The Agent's own context, caller included, is made once.)
    if caller.is_person or spend is not None or traced is not None or request.input is not None:
        extra: dict[str, Any] = {"caller": caller.recorded()}
        if request.input is not None:
            extra["input"] = request.input
        if spend is not None:
            extra.update(decide=decide, allowance=spend)
            decide = callers.LIMITED_DECIDE
        if traced is not None:
            extra.update(traced)
        context = rt.context_of(request.tool, **extra)
    wait: float | None = None  # the first attempt waits for a connection as long as the pool says
    for attempt in range(ATTEMPTS):
        try:
            async with rt.unit_of_work(transaction=False, timeout=wait) as work:
                result = await tc_db.call(
                    work.conn,
                    tool_call_id=request.tool_call_id,
                    conversation_id=request.conversation_id,
                    tool=request.tool,
                    fingerprint=digest,
                    arguments=arguments,
                    decide=decide,
                    context=context,
                )
                answer = _noted(rt, work, request, result, began)
        except errors.RaiseException as raised:
            if raised.diag.message_primary != callers.LIMITED or spend is None:
                raise
            raise _limited(request, spend, raised) from None
        except _RETRYABLE as error:
            if attempt == ATTEMPTS - 1:
                raise
            if isinstance(error, OperationalError) and not isinstance(error, _CONCURRENCY):
                wait = rt.settings.db_unavailable_after_seconds - (time.perf_counter() - began)
                if wait <= 0:
                    raise
            continue
        return answer
    raise AssertionError("unreachable")


def _limited(request: ToolCallRequest, spend: dict[str, Any], raised: errors.RaiseException) -> WriteLimited:
    """The 429 of a call past its allowance (counted; nothing recorded, so it may be made again)."""
    TOOL_CALLS.labels(request.tool, "too_many_requests").inc()
    retry_after = max(1, math.ceil(float(raised.diag.message_detail or 1)))
    return WriteLimited(
        f"at most {spend['max']} tool calls per {spend['window']} s per conversation and per person;"
        f" try again in {retry_after} s",
        retry_after=retry_after,
        retry_after_seconds=retry_after,
    )


def _noted(
    rt: Runtime, work: UnitOfWork, request: ToolCallRequest, result: tc_db.CallResult, began: float
) -> ToolAnswer:
    """What the call makes known once committed: the operation it settled, the conversation it
    changed, the deadline it opened; its count, duration and log line."""
    if result.settled is not None:
        work.observed([{**row, "tool_call_id": request.tool_call_id} for row in result.settled])
    kind = rt.registry.kind_of(result.outcome)
    if (kind is Accepted or result.changed) and not result.replayed:  # something opened or ended
        work.changed(request.conversation_id, outbox=result.queued)
    if result.deadline is not None:
        work.opened(result.deadline)

    def report() -> None:
        outcome = "replayed" if result.replayed else result.outcome
        count_tool_call(request.tool, outcome, time.perf_counter() - began)
        log.info(
            "tool_call",
            tool_call_id=request.tool_call_id,
            conversation_id=request.conversation_id,
            tool=request.tool,
            outcome=result.outcome,
            replayed=result.replayed,
        )

    work.then(report)
    return ToolAnswer(request.tool, result.outcome, kind, result.response.encode(), result.replayed)

"""The answer bodies of the ops API (``/v1/ops/*``) as types; see ``service.api.answers``.

No ``from __future__ import annotations`` here: Litestar reads these annotations at run time.
"""

from typing import Annotated, Any, Literal, TypedDict

from litestar.params import KwargDefinition

from service.api.answers import InteractResult, OperationRow, TimedResult
from service.documented import (
    AttemptOutcome,
    Count,
    OperationState,
    OutboxStatus,
    SchemaKeywords,
    Time,
    Uuid,
)

Seconds = Annotated[float, KwargDefinition(schema_extra=SchemaKeywords(minimum=0))]


class ToolResultEvent(TypedDict):
    event_id: Uuid
    type: Literal["tool.result"]
    tool: str
    tool_call_id: str
    conversation_id: str
    operation_id: Uuid | None
    sequence: Count
    result: TimedResult | InteractResult


class OutboxRow(TypedDict):
    event_id: Uuid
    operation_id: Uuid | None
    tool: str
    tool_call_id: str
    conversation_id: str
    sequence: Count
    status: OutboxStatus
    attempts: Count
    next_attempt_at: Time
    last_error: str | None
    created_at: Time
    delivered_at: Time | None
    lease_owner: str | None
    lease_expires_at: Time | None


class DeliveryAttempt(TypedDict):
    attempt: Annotated[int, KwargDefinition(ge=1)]
    relay_id: str
    started_at: Time
    duration_ms: Count
    status_code: int | None
    error_class: str | None
    response_excerpt: str | None
    outcome: AttemptOutcome


class OutboxRowDetail(OutboxRow):
    payload: ToolResultEvent
    delivery_attempts: list[DeliveryAttempt]


class OutboxList(TypedDict):
    outbox: list[OutboxRow]
    #: Pass as ``?cursor=`` for the next page; null on the last one.
    next_cursor: str | None


class OpsOperation(OperationRow):
    lateness_ms: int | None


class OperationList(TypedDict):
    operations: list[OpsOperation]


class OutboxStats(TypedDict):
    by_status: dict[OutboxStatus, Count]
    dead: Count
    due_now: Count
    oldest_pending_age_seconds: (
        Annotated[float, KwargDefinition(schema_extra=SchemaKeywords(minimum=0))] | None
    )


class OperationStats(TypedDict):
    by_state: dict[OperationState, Count]
    focusing: Count


class LatenessStats(TypedDict):
    completed: Count
    p50: int | None
    p99: int | None
    max: int | None


class AttemptStats(TypedDict):
    by_outcome: dict[AttemptOutcome, Count]
    total: Count


class HistoryStats(TypedDict):
    """History retention (HISTORY_RETENTION_DAYS) as the last replica to prune reported it (nulls
    until one has), and the oldest rows kept."""

    retention_days: Annotated[int, KwargDefinition(ge=1)] | None
    reported_by: str | None
    reported_at: Time | None
    last_pruned_at: Time | None
    last_pruned: dict[str, Count]
    total_pruned: Count
    oldest_operation_at: Time | None
    oldest_answer_at: Time | None
    oldest_message_at: Time | None


class Stats(TypedDict):
    outbox: OutboxStats
    operations: OperationStats
    deadline_lateness_ms: LatenessStats
    attempts_last_hour: AttemptStats
    history: HistoryStats
    server_time: Time


class RecordedAnswer(TypedDict):
    tool_call_id: str
    conversation_id: str
    tool: str
    status_code: Annotated[int, KwargDefinition(ge=200, le=599)]
    response: dict[str, Any]
    created_at: Time
    #: The OpenTelemetry trace id (32 hex digits) of the call that recorded the answer; null when
    #: it was not traced.
    trace_id: Annotated[str | None, KwargDefinition(pattern="^[0-9a-f]{32}$")]
    #: TRACE_URL_TEMPLATE with that trace id; null without either.
    trace_url: str | None


class ToolCallRow(TypedDict):
    tool_call_id: str
    conversation_id: str
    tool: str
    status_code: Annotated[int, KwargDefinition(ge=200, le=599)]
    #: The answer's ``status`` (``accepted``, ``interrupted``, …) or, for a refusal, its ``error``.
    outcome: str | None
    created_at: Time


class ToolCallList(TypedDict):
    #: The window the list covers, back from now.
    minutes: Count
    tool_calls: list[ToolCallRow]


class TracedOperation(OpsOperation):
    result: TimedResult | None


class ToolCallTrace(TypedDict):
    tool_call_id: str
    tool_call: RecordedAnswer | None
    operations: list[TracedOperation]
    outbox: list[OutboxRowDetail]


class MinuteCounts(TypedDict):
    at: Time
    created: Count
    delivered: Count
    failed: Count
    dead: Count


class LatenessWindow(TypedDict):
    completed: Count
    p50: int | None
    p90: int | None
    p99: int | None
    max: int | None


class LastHour(TypedDict):
    minutes: list[MinuteCounts]
    deliveries: Count
    failures: Count
    lateness_ms: LatenessWindow


class DepthSample(TypedDict):
    at: Time
    pending: Count
    dead: Count
    oldest_pending_age_seconds: Seconds


class DeliveryState(TypedDict):
    endpoint: str
    paused: bool
    paused_at: Time | None
    paused_by: str | None
    reason: str | None
    circuit: Literal["closed", "open", "half_open"]
    circuit_since: Time | None
    #: While the circuit is not closed: the earliest moment of the next probe.
    next_probe_at: Time | None
    last_probe_at: Time | None
    #: What opened the circuit (or failed its last probe).
    last_error: str | None


class Recovered(TypedDict):
    #: Dead rows that matched the filter when the recovery started.
    matched: Count
    #: Rows requeued (0 on a dry run).
    requeued: Count


class Retention(TypedDict):
    #: As the relay that last pruned reported them (null before any did).
    delivered_days: int | None
    dead_days: int | None
    reported_by: str | None
    reported_at: Time | None
    last_pruned_at: Time | None
    last_pruned_rows: int | None
    oldest_delivered_at: Time | None
    oldest_dead_at: Time | None


class Overview(TypedDict):
    stats: Stats
    last_hour: LastHour
    depth: list[DepthSample]
    delivery: DeliveryState
    retention: Retention

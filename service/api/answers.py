"""Every answer body of the HTTP API as a type: handlers declare them, Litestar documents them.

One definition of each shape. The use cases build these as plain dicts (``service.use_cases``);
the schemathesis run in the test suite checks every answer the service gives against the document
generated from these types. Error bodies are ``Error`` with, per route and status, the codes that
route can answer (``refusals``).

No ``from __future__ import annotations`` here: TypedDict needs its ``NotRequired`` markers as
objects, not strings.
"""

import functools
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, NotRequired, TypedDict

from litestar.openapi import ResponseSpec
from litestar.params import KwargDefinition

from service.apps.interact.answers import Interaction
from service.documented import (
    Count,
    FinalState,
    OperationReason,
    OperationState,
    Time,
    Uuid,
)

# --- errors ---------------------------------------------------------------------------------


class ErrorDetail(TypedDict):
    path: str
    message: str


class Error(TypedDict):
    """Every error body; some codes add fields (operation_id, revision, size_bytes, max_bytes;
    conversation_ids on an ambiguous trace)."""

    error: str
    message: str
    details: NotRequired[list[ErrorDetail]]
    operation_id: NotRequired[Uuid]
    revision: NotRequired[Count]
    size_bytes: NotRequired[Count]
    conversation_ids: NotRequired[list[str]]
    max_bytes: NotRequired[Count]


STATUS_MEANING = {
    400: "The body is not JSON",
    401: "No bearer token, a wrong one, or one of another audience",
    403: "Refused",
    404: "No such resource",
    409: "Conflict",
    410: "No longer kept (history retention)",
    413: "The body is too large",
    422: "The request has the wrong shape",
    429: "Too many at once",
    503: "Unavailable",
}


@functools.cache
def _error_type(codes: tuple[str, ...]) -> Any:
    """``Error`` whose ``error`` is one of ``codes`` (one component per set of codes)."""
    name = "Error" + "".join(code.title().replace("_", "") for code in codes)
    fields = {**Error.__annotations__, "error": Literal[codes]}
    typed = TypedDict(name, fields)  # type: ignore[misc]
    typed.__doc__ = f"An error body with one of the codes: {', '.join(codes)}."
    return typed


def refusals(
    errors: Mapping[int, Sequence[str]] | None = None,
    *,
    auth: bool = True,
    body: bool = False,
    path: bool = False,
) -> dict[int, ResponseSpec]:
    """The error answers of a route: status -> the codes it can answer with.

    Rules that hold for every route are added here: a protected route can answer 401; one that
    reads a body 400, 413 and 422; one with a path parameter 404 (a parameter holding "/", sent
    as %2F, reaches no route).
    """
    merged: dict[int, list[str]] = {}

    def add(status: int, *codes: str) -> None:
        known = merged.setdefault(status, [])
        known.extend(code for code in codes if code not in known)

    if auth:
        add(401, "unauthorized")
    if body:
        add(400, "malformed_json")
        add(413, "request_too_large")
        add(422, "invalid_request")
    if path:
        add(404, "not_found")
    for status, codes in (errors or {}).items():
        add(status, *codes)
    return {
        status: ResponseSpec(
            data_container=_error_type(tuple(codes)),
            description=f"{STATUS_MEANING.get(status, 'Error')}: {', '.join(codes)}",
            generate_examples=False,
        )
        for status, codes in sorted(merged.items())
    }


def answer(data: Any, description: str, **kwargs: Any) -> ResponseSpec:
    return ResponseSpec(data_container=data, description=description, generate_examples=False, **kwargs)


# --- Agent Tool API -------------------------------------------------------------------------


class Tool(TypedDict):
    name: str
    app_scope: str
    kind: Literal["direct", "launch", "foreground", "operation"]
    description: str
    input_schema: dict[str, Any]


class ToolList(TypedDict):
    tools: list[Tool]


class TimedResult(TypedDict):
    """How a timed operation ended (a Pomodoro's, a kettle's): its result, as the outbox carries it."""

    state: FinalState
    reason: OperationReason
    activity: str | None
    duration_seconds: int
    started_at: Time
    ends_at: Time
    finalized_at: Time
    focused_seconds: Count


class InteractResult(TypedDict):
    state: Literal["answered"]
    answer: str
    answered_at: Time


class OperationRow(TypedDict):
    """The columns of an operation every view of one shows."""

    operation_id: Uuid
    tool: str
    tool_call_id: str
    conversation_id: str
    app_scope: str
    instance_id: Uuid
    state: OperationState
    reason: OperationReason | None
    activity: str | None
    duration_seconds: int
    started_at: Time
    ends_at: Time
    finalized_at: Time | None


class Operation(OperationRow):
    done: bool
    result: TimedResult | None


# --- Host API -------------------------------------------------------------------------------


class ForegroundApp(TypedDict):
    app_scope: str
    instance_id: Uuid


class WorkspaceInstance(TypedDict):
    instance_id: Uuid
    app_scope: str
    status: Literal["open", "closed"]
    sub_session_id: Uuid | None


class Workspace(TypedDict):
    conversation_id: str
    foreground: Literal["interact"] | ForegroundApp
    instances: list[WorkspaceInstance]
    focusing_operation: Operation | None
    pending_interactions: list[Interaction]
    server_time: Time


class Message(TypedDict):
    message_id: Uuid
    conversation_id: str
    sub_session_id: Uuid | None
    role: Literal["user", "agent"]
    text: str
    created_at: Time


class MessageList(TypedDict):
    messages: list[Message]


class OperationBrief(TypedDict):
    operation_id: Uuid
    state: OperationState
    reason: OperationReason | None


class CloseResult(TypedDict):
    instance_id: Uuid
    app_scope: str
    status: Literal["closed"]
    operation: OperationBrief | None


class SurfaceEventResult(TypedDict):
    interrupted: Literal[False]


class Capability(TypedDict):
    capability: str


class InteractionReceipt(TypedDict):
    tool_call_id: str
    status: Literal["answered"]
    answer: str
    answered_at: Time


class FormsReceipt(TypedDict):
    tool_call_id: str
    status: Literal["pending", "answered"]
    answers: dict[str, dict[str, Any]]
    answered_at: Time | None


class HostSession(TypedDict):
    session_id: Uuid
    session: str
    subject: str
    conversation_ids: list[str]
    expires_at: Time


# --- SDK API --------------------------------------------------------------------------------


class SdkOperation(TypedDict):
    operation_id: Uuid
    state: OperationState
    reason: OperationReason | None
    activity: str | None
    started_at: Time
    ends_at: Time


class SdkContext(TypedDict):
    app_scope: str
    instance_id: Uuid
    conversation_id: str
    status: Literal["open", "closed"]
    operation: SdkOperation | None
    server_time: Time


class InstanceState(TypedDict):
    schema_version: Annotated[int, KwargDefinition(ge=1)]
    revision: Count
    data: dict[str, Any]
    readonly: bool
    deleted: NotRequired[Literal[True]]


class StateRevision(TypedDict):
    revision: Count


# --- probes ---------------------------------------------------------------------------------


class Health(TypedDict):
    status: Literal["ok"]
    #: The release this process runs (service.version, semantic versioning).
    version: str


class Ready(TypedDict):
    status: Literal["ready"]
    migration: str


class NotReady(TypedDict):
    status: Literal["unavailable"]
    reason: str

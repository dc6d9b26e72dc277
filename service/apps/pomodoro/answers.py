"""The answers of Pomodoro's Tools, as types: its registration names them, and the OpenAPI
document of ``POST /v1/tool-calls`` is built from them.

No ``from __future__ import annotations`` here: TypedDict needs its ``NotRequired`` markers as
objects, not strings.
"""

from typing import Annotated, Literal, TypedDict

from litestar.params import KwargDefinition

from service.documented import FinalState, OperationState, Time, Uuid


class StartedOperation(TypedDict):
    operation_id: Uuid
    state: OperationState
    started_at: Time
    ends_at: Time
    duration_seconds: Annotated[int, KwargDefinition(ge=1, le=14400)]
    activity: str | None


class PomodoroStartAccepted(TypedDict):
    tool_call_id: str
    status: Literal["accepted"]
    operation: StartedOperation
    instance_id: Uuid
    sub_session_id: Uuid


class Interrupted(TypedDict):
    tool_call_id: str
    status: Literal["interrupted"]
    operation_id: Uuid


class AlreadyFinal(TypedDict):
    tool_call_id: str
    status: Literal["operation_already_final"]
    operation_id: Uuid
    final_state: FinalState


class NoActiveOperation(TypedDict):
    tool_call_id: str
    status: Literal["no_active_focusing_operation"]

"""Pomodoro's Tools: ``pomodoro.start`` opens a focus period, ``pomodoro.interrupt`` stops it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from service.apps.pomodoro.answers import AlreadyFinal, Interrupted, NoActiveOperation, PomodoroStartAccepted
from service.domain.errors import Conflict
from service.domain.outcomes import Accepted, Answered
from service.tools import Hints, Registration

if TYPE_CHECKING:
    from service.app_manifest import AppManifest
    from service.settings import Settings


def _snapshot_schema(settings: Settings, app: AppManifest) -> Mapping[str, Any]:
    feature = app.instance_state
    return {"state_schema_version": feature.state_schema_version if feature is not None else 1}


def _late_window(settings: Settings, app: AppManifest) -> Mapping[str, Any]:
    return {"late_window_seconds": settings.interrupt_late_window_seconds}


def _started(body: Mapping[str, Any]) -> str:
    operation = body["operation"]
    return (
        f"A {operation['duration_seconds']}-second focus period started; it ends at "
        f"{operation['ends_at']} unless it is stopped first."
    )


def _stopped(body: Mapping[str, Any]) -> str:
    if body["status"] == "interrupted":
        return "The focus period was stopped."
    if body["status"] == "operation_already_final":
        return f"The latest focus period had already ended ({body.get('final_state')})."
    return "No focus period is running in this conversation."


START = Registration(
    name="pomodoro.start",
    decide="pomodoro_start",
    outcomes={"accepted": Accepted, "operation_already_focusing": Conflict},
    hints=Hints(title="Start a focus period"),
    sentence=_started,
    opens="operation",
    context=_snapshot_schema,
    answers={"accepted": PomodoroStartAccepted},
)

INTERRUPT = Registration(
    name="pomodoro.interrupt",
    decide="pomodoro_interrupt",
    outcomes={
        "interrupted": Answered,
        "operation_already_final": Answered,
        "no_active_focusing_operation": Answered,
    },
    hints=Hints(title="Stop the focus period", destructive=True),
    sentence=_stopped,
    context=_late_window,
    answers={
        "interrupted": Interrupted,
        "operation_already_final": AlreadyFinal,
        "no_active_focusing_operation": NoActiveOperation,
    },
)

REGISTRATIONS = (START, INTERRUPT)

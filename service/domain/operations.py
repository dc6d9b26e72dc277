"""The Pomodoro operation: its states, how it may end, and the receipts late callers get."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum


class State(StrEnum):
    FOCUSING = "focusing"
    COMPLETED = "completed"
    INTERRUPTED = "interrupted"
    CANCELLED = "cancelled"


class Reason(StrEnum):
    DEADLINE_REACHED = "deadline_reached"
    AGENT_INTERRUPT = "agent_interrupt"
    USER_LEFT_WORKSPACE = "user_left_workspace"
    APP_CLOSED = "app_closed"


@dataclass(frozen=True)
class Ending:
    """One way a focusing operation may end; the database turns any of them into ``completed``
    when it arrives at or after ``ends_at``."""

    state: State
    reason: Reason


DEADLINE = Ending(State.COMPLETED, Reason.DEADLINE_REACHED)
AGENT_INTERRUPT = Ending(State.INTERRUPTED, Reason.AGENT_INTERRUPT)
USER_LEFT = Ending(State.INTERRUPTED, Reason.USER_LEFT_WORKSPACE)
APP_CLOSED = Ending(State.CANCELLED, Reason.APP_CLOSED)

POMODORO_START = "pomodoro.start"
POMODORO_INTERRUPT = "pomodoro.interrupt"
POMODORO_SCOPE = "pomodoro"


class InterruptStatus(StrEnum):
    INTERRUPTED = "interrupted"
    ALREADY_FINAL = "operation_already_final"
    NO_ACTIVE = "no_active_focusing_operation"


def logical_end(state: str, ends_at: datetime, finalized_at: datetime | None) -> datetime | None:
    """When a final operation logically ended: the deadline for ``completed``, else the decision."""
    if state == State.FOCUSING:
        return None
    return ends_at if state == State.COMPLETED else finalized_at


def late_interrupt_status(
    state: str,
    ends_at: datetime,
    finalized_at: datetime | None,
    now: datetime,
    window: timedelta,
) -> InterruptStatus:
    """The receipt for an interrupt that found nothing focusing.

    ``operation_already_final`` when the conversation's latest operation ended within ``window``
    before ``now`` (it lost the race or just ran out), otherwise ``no_active_focusing_operation``.
    """
    end = logical_end(state, ends_at, finalized_at)
    if end is not None and now - end <= window:
        return InterruptStatus.ALREADY_FINAL
    return InterruptStatus.NO_ACTIVE


def focused_seconds(started_at: datetime, finalized_at: datetime, duration_seconds: int) -> int:
    """Whole seconds focused, never more than asked for (mirrors the SQL in ``settle``)."""
    return max(0, min(duration_seconds, int((finalized_at - started_at).total_seconds())))

"""An operation (of any app: a Pomodoro's focus period, …): its states, how it may end, and the receipts
Pomodoro's late interrupt gets."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum


class State(StrEnum):
    FOCUSING = "focusing"
    COMPLETED = "completed"
    INTERRUPTED = "interrupted"
    CANCELLED = "cancelled"
    # Its app's decision ended it in failure, with an error (its ``result``'s ``error``).
    FAILED = "failed"


class Reason(StrEnum):
    DEADLINE_REACHED = "deadline_reached"
    AGENT_INTERRUPT = "agent_interrupt"
    # A person's interrupt (a person's token on /mcp: pomodoro.interrupt or a task cancel).
    PERSON_INTERRUPT = "person_interrupt"
    USER_LEFT_WORKSPACE = "user_left_workspace"
    APP_CLOSED = "app_closed"
    # Its app's later decision failed it (app_fail_operation); failed at its deadline is
    # ``deadline_reached``.
    APP_FAILED = "app_failed"


@dataclass(frozen=True)
class Ending:
    """One way a focusing operation may end; the database turns any of them into ``completed``
    when it arrives at or after ``ends_at``."""

    state: State
    reason: Reason


DEADLINE = Ending(State.COMPLETED, Reason.DEADLINE_REACHED)
AGENT_INTERRUPT = Ending(State.INTERRUPTED, Reason.AGENT_INTERRUPT)
PERSON_INTERRUPT = Ending(State.INTERRUPTED, Reason.PERSON_INTERRUPT)
USER_LEFT = Ending(State.INTERRUPTED, Reason.USER_LEFT_WORKSPACE)
APP_CLOSED = Ending(State.CANCELLED, Reason.APP_CLOSED)


class InterruptStatus(StrEnum):
    """The receipts of ``pomodoro.interrupt``; the late-interrupt rule that picks between the last
    two is the SQL function ``late_interrupt_status`` (service/apps/pomodoro/decisions.sql)."""

    INTERRUPTED = "interrupted"
    ALREADY_FINAL = "operation_already_final"
    NO_ACTIVE = "no_active_focusing_operation"


def focused_seconds(started_at: datetime, finalized_at: datetime, duration_seconds: int) -> int:
    """Whole seconds focused, never more than asked for (mirrors the SQL in ``settle``)."""
    return max(0, min(duration_seconds, int((finalized_at - started_at).total_seconds())))

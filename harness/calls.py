"""Small builders for Agent and Host API calls used across tests, benches and rigs."""

from __future__ import annotations

import uuid
from typing import Any


def start_body(
    conversation_id: str, duration_seconds: int = 1500, activity: str | None = "write report", **extra: Any
) -> dict[str, Any]:
    arguments: dict[str, Any] = {"duration_seconds": duration_seconds}
    if activity is not None:
        arguments["activity"] = activity
    return {
        "tool_call_id": extra.pop("tool_call_id", f"start-{uuid.uuid4()}"),
        "conversation_id": conversation_id,
        "tool": "pomodoro.start",
        "arguments": arguments,
        **extra,
    }


def interrupt_body(
    conversation_id: str, *, tool_call_id: str | None = None, **arguments: Any
) -> dict[str, Any]:
    return {
        "tool_call_id": tool_call_id or f"interrupt-{uuid.uuid4()}",
        "conversation_id": conversation_id,
        "tool": "pomodoro.interrupt",
        "arguments": arguments,
    }


def expire(db: Any, operation_id: str, seconds_ago: float = 0.5) -> None:
    """Move an operation's period into the past so that ``ends_at`` lies ``seconds_ago`` back."""
    db.execute(
        """
        UPDATE operations
        SET started_at = started_at - (ends_at - now()) - make_interval(secs => %(ago)s),
            ends_at = ends_at - (ends_at - now()) - make_interval(secs => %(ago)s)
        WHERE operation_id = %(id)s
        """,
        {"id": operation_id, "ago": seconds_ago},
    )

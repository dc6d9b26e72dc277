"""The demo Agent's rules, no language model: what a message asks for, and each reply in words.

Pure functions only; ``demo_agent.conversations`` does the HTTP. The Host shows each Tool result as
a compact line of its own; these are the Agent's words about it, said once: a stop the Agent asked
for is told from its receipt (in the order things happened), every other ending when the relay
delivers it. The words name no clock time: the page shows times in the person's own locale and
time zone, which the Agent does not know.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

DEFAULT_FOCUS_SECONDS = 25 * 60
MAX_FOCUS_SECONDS = 4 * 60 * 60
MAX_ACTIVITY = 200

HELP = "I can run a focus timer for you. Try “focus 25 minutes on writing”, “how long is left?” or “stop”."


@dataclass(frozen=True)
class StartFocus:
    duration_seconds: int
    activity: str | None


@dataclass(frozen=True)
class StopFocus:
    pass


@dataclass(frozen=True)
class AskRemaining:
    pass


@dataclass(frozen=True)
class Help:
    reason: str = ""


Intent = StartFocus | StopFocus | AskRemaining | Help

_STOP_WORDS = r"(stop|cancel|interrupt|abort|quit|end it|end the|enough)"
_STOP_FIRST = re.compile(rf"^\W*(please\s+|ok\W+|okay\W+)?{_STOP_WORDS}\b", re.IGNORECASE)
_STOP_ANYWHERE = re.compile(rf"\b{_STOP_WORDS}\b", re.IGNORECASE)
_START = re.compile(r"\b(focus|pomodoro|concentrate)\b", re.IGNORECASE)
_REMAINING = re.compile(r"\b(how (long|much time)|time left|remaining)\b|\bleft\W*$", re.IGNORECASE)
_DURATION = re.compile(
    r"(\bfor\s+)?(?P<amount>\d+(?:[.,]\d+)?)\s*(?P<unit>hours?|hrs?|h|minutes?|mins?|m|seconds?|secs?|s)\b",
    re.IGNORECASE,
)
_ACTIVITY = re.compile(r"\b(?:on|for)\s+(?P<activity>.*\w)", re.IGNORECASE)
_UNIT_SECONDS = {"h": 3600, "m": 60, "s": 1}


def _start(text: str, keyword: re.Match[str]) -> Intent:
    duration = _DURATION.search(text)
    seconds = DEFAULT_FOCUS_SECONDS
    if duration is not None:
        amount = float(duration["amount"].replace(",", "."))
        seconds = round(amount * _UNIT_SECONDS[duration["unit"][0].lower()])
        text = text[: duration.start()] + " " + text[duration.end() :]
    if not 1 <= seconds <= MAX_FOCUS_SECONDS:
        return Help("A focus period can last from 1 second to 4 hours.")
    found = _ACTIVITY.search(text, keyword.start())
    activity = found["activity"].strip()[:MAX_ACTIVITY] if found else ""
    return StartFocus(seconds, activity or None)


def understand(text: str) -> Intent:
    """The intent of one message from the person."""
    if _STOP_FIRST.search(text):
        return StopFocus()
    keyword = _START.search(text)
    if keyword is not None:
        return _start(text, keyword)
    if _STOP_ANYWHERE.search(text):
        return StopFocus()
    if _REMAINING.search(text):
        return AskRemaining()
    return Help()


def span(seconds: float) -> str:
    """``25 min``, ``1 min 30 s``, ``45 s``, ``1 h 5 min``."""
    whole = max(0, round(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{hours} h" if hours else "", f"{minutes} min" if minutes else "", f"{secs} s" if secs else ""]
    return " ".join(part for part in parts if part) or "0 s"


def _on(activity: str | None) -> str:
    return f" on {activity}" if activity else ""


def started(duration_seconds: int, activity: str | None) -> str:
    return f"Focus period started: {span(duration_seconds)}{_on(activity)}. I'll tell you when it ends."


def already_focusing() -> str:
    return "A focus period is already running. Say “stop” to end it, or “how long is left?”."


def interrupt_receipt(receipt: dict[str, Any], operation: dict[str, Any] | None = None) -> str:
    """The reply to "stop", from the receipt and, once interrupted, the operation read back."""
    status = receipt.get("status")
    if status == "interrupted":
        outcome = (operation or {}).get("result") or {}
        if "focused_seconds" not in outcome:
            return "Stopped the focus period."
        return f"Stopped: you focused {_focused(outcome)}."
    if status == "operation_already_final":
        return f"That focus period had already ended ({receipt.get('final_state')})."
    return "No focus period is running right now."


def _focused(outcome: dict[str, Any]) -> str:
    """``10 s of 1 min on tests``."""
    focused = int(outcome.get("focused_seconds") or 0)
    duration = int(outcome.get("duration_seconds") or 0)
    return f"{span(focused)} of {span(duration)}{_on(outcome.get('activity'))}"


def _moment(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def remaining(workspace: dict[str, Any]) -> str:
    """From the workspace's focusing operation and the server's clock."""
    operation = workspace.get("focusing_operation")
    if not operation:
        return "No focus period is running right now."
    left = (_moment(operation["ends_at"]) - _moment(workspace["server_time"])).total_seconds()
    if left <= 0:
        return "The focus period is ending right now."
    # Whole seconds rounded up, as the countdown shows them.
    return f"{span(math.ceil(left))} left{_on(operation.get('activity'))}."


# What the person did, for each way a focus period ends early. Leaving is switching back to
# Interact or opening another app: the result does not say which, so the words cover both.
_ENDINGS: dict[tuple[Any, Any], str] = {
    ("interrupted", "user_left_workspace"): "You switched away from the Pomodoro, so the focus period ended",
    ("interrupted", "person_interrupt"): "You stopped the Pomodoro yourself, so the focus period ended",
    ("cancelled", "app_closed"): "You closed the Pomodoro, so the focus period ended",
}


def result(tool: str, outcome: dict[str, Any]) -> str | None:
    """A reply describing one Tool result the relay delivered, or None for results not worth one
    (a stop the Agent asked for was told from its receipt already)."""
    if tool == "interact.ask":
        return f"Thanks, noted: {outcome.get('answer')}."
    if tool != "pomodoro.start":
        return None
    state, reason = outcome.get("state"), outcome.get("reason")
    if reason == "agent_interrupt":
        return None
    if state == "completed":
        duration = int(outcome.get("duration_seconds") or 0)
        return f"Time's up: you focused {span(duration)}{_on(outcome.get('activity'))}."
    heading = _ENDINGS.get((state, reason), f"The focus period was {state}")
    return f"{heading} after {_focused(outcome)}."


def failed(body: dict[str, Any]) -> str:
    return f"Sorry, that did not work: {body.get('message') or body.get('error') or 'unknown error'}."

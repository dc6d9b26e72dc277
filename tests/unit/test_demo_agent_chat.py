"""The demo Agent's rules: what each message asks for and how each result is put in words."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from demo_agent.chat import (
    HELP,
    AskRemaining,
    Help,
    StartFocus,
    StopFocus,
    already_focusing,
    interrupt_receipt,
    remaining,
    result,
    span,
    started,
    understand,
)
from demo_agent.conversations import DemoAgent, SseEvent, sse_events
from demo_agent.webhooks import ToolResult


@pytest.mark.parametrize(
    ("text", "intent"),
    [
        ("focus 25 minutes on writing", StartFocus(1500, "writing")),
        ("focus 1 minute on tests", StartFocus(60, "tests")),
        ("Focus on writing for 25 minutes.", StartFocus(1500, "writing")),
        ("pomodoro 10 min for the report", StartFocus(600, "the report")),
        ("focus 2h on taxes!", StartFocus(7200, "taxes")),
        ("focus 90 seconds", StartFocus(90, None)),
        ("start a pomodoro", StartFocus(1500, None)),
        ("focus 1.5 min on stop-motion", StartFocus(90, "stop-motion")),
    ],
)
def test_a_focus_request_becomes_a_start_with_duration_and_activity(text: str, intent: StartFocus) -> None:
    assert understand(text) == intent


@pytest.mark.parametrize("text", ["focus 0 minutes", "focus 5 hours on everything"])
def test_a_duration_outside_1_second_to_4_hours_gets_an_explanation_not_a_start(text: str) -> None:
    intent = understand(text)
    assert isinstance(intent, Help)
    assert "4 hours" in intent.reason


@pytest.mark.parametrize("text", ["stop", "Stop!", "please stop", "stop the focus timer", "can you end it"])
def test_stop_becomes_an_interrupt(text: str) -> None:
    assert understand(text) == StopFocus()


@pytest.mark.parametrize("text", ["how long is left?", "How much time do I have left", "time left"])
def test_how_long_is_left_asks_for_the_remaining_time(text: str) -> None:
    assert understand(text) == AskRemaining()


@pytest.mark.parametrize("text", ["hello", "what can you do", "", "25"])
def test_anything_else_gets_the_short_help(text: str) -> None:
    assert understand(text) == Help()
    assert "focus 25 minutes on writing" in HELP


def test_spans_read_like_a_person_would_say_them() -> None:
    assert [span(s) for s in (0, 45, 60, 90, 1500, 3900)] == [
        "0 s",
        "45 s",
        "1 min",
        "1 min 30 s",
        "25 min",
        "1 h 5 min",
    ]


def test_the_remaining_time_comes_from_ends_at_and_the_server_clock() -> None:
    workspace = {
        "server_time": "2026-11-30T10:00:00.000000Z",
        "focusing_operation": {"ends_at": "2026-11-30T10:12:30.500000Z", "activity": "writing"},
    }
    assert remaining(workspace) == "12 min 31 s left on writing."  # no clock time: not the person's zone
    assert (
        remaining({"server_time": "x", "focusing_operation": None}) == "No focus period is running right now."
    )


@pytest.mark.parametrize(
    ("outcome", "reply"),
    [
        (
            {
                "state": "completed",
                "reason": "deadline_reached",
                "activity": "writing",
                "duration_seconds": 1500,
            },
            "Time's up: you focused 25 min on writing.",
        ),
        (
            {
                "state": "interrupted",
                "reason": "user_left_workspace",
                "activity": None,
                "duration_seconds": 1500,
                "focused_seconds": 300,
            },
            "You switched away from the Pomodoro, so the focus period ended after 5 min of 25 min.",
        ),
        (
            {
                "state": "cancelled",
                "reason": "app_closed",
                "activity": "email",
                "duration_seconds": 600,
                "focused_seconds": 61,
            },
            "You closed the Pomodoro, so the focus period ended after 1 min 1 s of 10 min on email.",
        ),
    ],
)
def test_each_delivered_result_is_described_naming_what_the_person_did(
    outcome: dict[str, object], reply: str
) -> None:
    described = result("pomodoro.start", outcome)
    assert described == reply
    assert "workspace" not in described  # opening another app is not leaving the workspace


def test_a_stop_the_agent_asked_for_is_told_from_its_receipt_not_again_when_delivered() -> None:
    outcome = {
        "state": "interrupted",
        "reason": "agent_interrupt",
        "activity": "tests",
        "duration_seconds": 60,
        "focused_seconds": 12,
    }
    assert result("pomodoro.start", outcome) is None
    receipt = {"status": "interrupted", "operation_id": "op-1"}
    assert interrupt_receipt(receipt, {"result": outcome}) == "Stopped: you focused 12 s of 1 min on tests."
    assert interrupt_receipt(receipt, None) == "Stopped the focus period."


def test_answers_and_unknown_tools() -> None:
    assert result("interact.ask", {"state": "answered", "answer": "yes"}) == "Thanks, noted: yes."
    assert result("something.else", {}) is None


def test_receipts_and_start_replies() -> None:
    assert started(60, "tests") == "Focus period started: 1 min on tests. I'll tell you when it ends."
    assert "completed" in interrupt_receipt({"status": "operation_already_final", "final_state": "completed"})
    assert interrupt_receipt({"status": "no_active_focusing_operation"}).startswith("No focus period")


class FakeLineup:
    """Records the demo Agent's calls; answers tool calls from a script."""

    def __init__(self, answers: dict[str, tuple[int, dict[str, Any]]]) -> None:
        self.answers = answers
        self.calls: list[tuple[str, str, str, dict[str, Any]]] = []
        self.said: list[tuple[str, str]] = []
        self.read: list[str] = []
        self.operations: dict[str, dict[str, Any]] = {}

    async def call_tool(
        self, tool_call_id: str, conversation_id: str, tool: str, arguments: dict[str, Any]
    ) -> tuple[int, dict[str, Any]]:
        self.calls.append((tool_call_id, conversation_id, tool, arguments))
        return self.answers[tool]

    async def workspace(self, conversation_id: str) -> dict[str, Any]:
        return {"server_time": "2026-11-30T10:00:00.000000Z", "focusing_operation": None}

    async def operation(self, operation_id: str) -> dict[str, Any] | None:
        self.read.append(operation_id)
        return self.operations.get(operation_id)

    async def say(self, conversation_id: str, text: str) -> None:
        self.said.append((conversation_id, text))


def user(text: str, message_id: str = "m-1", **extra: Any) -> dict[str, Any]:
    return {"message_id": message_id, "role": "user", "text": text, "sub_session_id": None, **extra}


async def test_a_message_is_answered_once_with_its_tool_call_keyed_by_the_message() -> None:
    lineup = FakeLineup({"pomodoro.start": (202, {"status": "accepted"})})
    agent = DemoAgent(lineup)  # type: ignore[arg-type]
    await agent.on_message("demo", user("focus 1 minute on tests"))
    await agent.on_message("demo", user("focus 1 minute on tests"))  # the same event again
    assert lineup.calls == [
        ("demo-m-1", "demo", "pomodoro.start", {"duration_seconds": 60, "activity": "tests"})
    ]
    assert lineup.said == [("demo", "Focus period started: 1 min on tests. I'll tell you when it ends.")]


async def test_agent_and_sub_session_messages_get_no_answer() -> None:
    lineup = FakeLineup({})
    agent = DemoAgent(lineup)  # type: ignore[arg-type]
    await agent.on_message("demo", {**user("stop"), "role": "agent"})
    await agent.on_message("demo", user("stop", sub_session_id="s-1"))
    assert lineup.calls == [] and lineup.said == []


async def test_refusals_and_receipts_become_replies() -> None:
    lineup = FakeLineup(
        {
            "pomodoro.start": (409, {"error": "operation_already_focusing", "operation_id": "x"}),
            "pomodoro.interrupt": (200, {"status": "no_active_focusing_operation"}),
        }
    )
    agent = DemoAgent(lineup)  # type: ignore[arg-type]
    await agent.on_message("demo", user("focus 25 minutes", "m-1"))
    await agent.on_message("demo", user("stop", "m-2"))
    await agent.on_message("demo", user("how long is left?", "m-3"))
    assert [text for _, text in lineup.said] == [
        already_focusing(),
        "No focus period is running right now.",
        "No focus period is running right now.",
    ]
    assert [call[2:] for call in lineup.calls] == [
        ("pomodoro.start", {"duration_seconds": 1500}),
        ("pomodoro.interrupt", {}),
    ]


async def test_a_delivered_result_is_told_in_its_conversation() -> None:
    lineup = FakeLineup({})
    agent = DemoAgent(lineup)  # type: ignore[arg-type]
    outcome = {
        "state": "completed",
        "reason": "deadline_reached",
        "activity": "writing",
        "duration_seconds": 1500,
    }
    delivered = ToolResult("e-1", "pomodoro.start", "demo-m-1", "demo", "op-1", 1, outcome)
    await agent.on_result(delivered)
    assert lineup.said == [("demo", "Time's up: you focused 25 min on writing.")]


async def test_stop_is_answered_once_with_the_focused_time_read_back_from_the_operation() -> None:
    lineup = FakeLineup({"pomodoro.interrupt": (200, {"status": "interrupted", "operation_id": "op-9"})})
    outcome = {
        "state": "interrupted",
        "reason": "agent_interrupt",
        "activity": "tests",
        "duration_seconds": 60,
        "focused_seconds": 10,
    }
    lineup.operations["op-9"] = {"operation_id": "op-9", "state": "interrupted", "result": outcome}
    agent = DemoAgent(lineup)  # type: ignore[arg-type]
    await agent.on_message("demo", user("stop"))
    await agent.on_result(ToolResult("e-9", "pomodoro.start", "demo-m-0", "demo", "op-9", 2, outcome))
    assert lineup.read == ["op-9"]
    assert lineup.said == [("demo", "Stopped: you focused 10 s of 1 min on tests.")]


async def test_server_sent_events_are_parsed_with_ids_kinds_and_comments() -> None:
    body = b': stream open\nretry: 2000\n\nid: 7\nevent: message\ndata: {"a": 1}\n\n: keepalive\n\nid: 8\nevent: workspace\ndata: {}\n\n'
    response = httpx.Response(200, content=body, headers={"Content-Type": "text/event-stream"})
    events = [event async for event in sse_events(response)]
    assert events == [SseEvent("7", "message", '{"a": 1}'), SseEvent("8", "workspace", "{}")]

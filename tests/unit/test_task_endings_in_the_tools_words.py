"""A finished operation's MCP task (2026-07-28) reads in its Tool's words when its registration
gives them (``Registration.ended``), and in the engine's own sentence otherwise — Pomodoro's as ever."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from service.mcp.tasks_extension import detailed
from tests.conftest import registry_with

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "conformance_app"


def finished(tool: str, activity: str) -> dict[str, Any]:
    result = {
        "state": "completed",
        "reason": "deadline_reached",
        "activity": activity,
        "duration_seconds": 1500,
        "focused_seconds": 1500,
    }
    return {
        "kind": "operation",
        "task_id": "0193a000-0000-7000-8000-000000000000",
        "tool": tool,
        "state": "completed",
        "reason": "deadline_reached",
        "started_at": "2026-12-07T10:00:00Z",
        "ends_at": "2026-12-07T10:25:00Z",
        "finalized_at": "2026-12-07T10:25:00Z",
        "result": result,
    }


def test_an_operation_ends_in_its_tools_words_or_in_the_engines_sentence() -> None:
    registry = registry_with(FIXTURES)
    pomodoro = detailed(finished("pomodoro.start", "deep work"), registry)["result"]
    assert (
        pomodoro["content"][0]["text"] == "The focus period ended completed (deadline_reached) after 1500 s."
    )
    worded = detailed(finished("conformance.test-tool-with-task", "Hello, Alice!"), registry)["result"]
    assert worded["content"][0]["text"] == "Hello, Alice! Computed: completed (deadline_reached)."
    assert worded["structuredContent"]["activity"] == "Hello, Alice!"

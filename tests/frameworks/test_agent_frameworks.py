"""The loop with the frameworks people build agents with, each against a real stack (``serve`` and
the relay) and each driven by its own deterministic test model (FastMCP is a client, no model):
list the tools, start a short focus period, learn its ending, interrupt a long one, interrupt once
more (late), and ask the person a question the person answers through the Host API.

Each framework runs in its own virtual environment (``make frameworks``), as a script in
``clients/`` that reports each step; these tests check the report against the relay's webhooks:
what the agent learned is the very result the Agent's backend is delivered, once.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import pytest

from tests.frameworks.conftest import PROVIDER_NAME, Stack, framework_python, run_loop

pytestmark = pytest.mark.frameworks


@dataclass(frozen=True)
class Framework:
    name: str
    #: Whether it declares MCP tasks (a long call's ending is the call's result); without, its
    #: model learns the ending through ``operation_status``.
    tasks: bool


FRAMEWORKS = [
    Framework("fastmcp", tasks=True),
    Framework("pydantic_ai", tasks=True),
    Framework("openai_agents", tasks=False),
    Framework("langchain", tasks=False),
]
REPORTS: dict[str, tuple[str, dict[str, dict[str, Any]]]] = {}


def loop(stack: Stack, framework: Framework) -> tuple[str, dict[str, dict[str, Any]]]:
    """The framework's run (once per session): its conversation and its report."""
    if framework.name not in REPORTS:
        conversation_id = f"{framework.name}-{uuid.uuid4()}"
        REPORTS[framework.name] = (
            conversation_id,
            run_loop(stack, framework_python(framework.name), f"{framework.name}_loop", conversation_id),
        )
    return REPORTS[framework.name]


def by_operation(delivered: list[dict[str, Any]], operation_id: str) -> list[dict[str, Any]]:
    return [d["result"] for d in delivered if d["operation_id"] == operation_id]


@pytest.mark.parametrize("framework", FRAMEWORKS, ids=lambda f: f.name)
def test_the_framework_runs_the_whole_loop(stack: Stack, framework: Framework) -> None:
    conversation_id, steps = loop(stack, framework)
    delivered = stack.wait_delivered(conversation_id, 3)  # the two periods' and the answer's results

    # 1. Every name the framework hands its model is one every provider accepts.
    names = steps["list"]["names"]
    assert names and all(PROVIDER_NAME.match(name) for name in names), names
    assert {"pomodoro_start", "pomodoro_interrupt", "interact_ask", "operation_status"} <= set(names)

    # 2 and 3. A short period, and its ending as the agent learned it: the relay's result, once.
    ending = steps["ending"]
    assert ending["via"] == ("task" if framework.tasks else "operation_status")
    if framework.tasks:
        assert steps["start"]["answer"] == ending["result"]
    else:
        assert steps["start"]["answer"]["status"] == "accepted"
        assert steps["start"]["answer"]["operation"]["state"] == "focusing"
    result = ending["result"]
    assert (result["state"], result["reason"]) == ("completed", "deadline_reached")
    completed = [
        d for d in delivered if d["tool"] == "pomodoro.start" and d["result"]["state"] == "completed"
    ]
    assert [d["result"] for d in completed] == [result]
    if not framework.tasks:
        assert ending["operation_id"] == completed[0]["operation_id"]

    # 4. A long period interrupted, and its ending.
    interrupt = steps["interrupt"]["answer"]
    assert interrupt["status"] == "interrupted"
    interrupted = steps["interrupted"]["result"]
    assert (interrupted["state"], interrupted["reason"]) == ("interrupted", "agent_interrupt")
    assert by_operation(delivered, interrupt["operation_id"]) == [interrupted]

    # 5. Once more, late: the stable answer, not an error.
    late = steps["late_interrupt"]["answer"]
    assert late["status"] == "operation_already_final"
    assert (late["operation_id"], late["final_state"]) == (interrupt["operation_id"], "interrupted")

    # 6. The question, answered by the person through the Host API; the Agent's backend gets it once.
    answers = [d["result"] for d in delivered if d["tool"] == "interact.ask"]
    assert len(answers) == 1 and answers[0]["state"] == "answered" and answers[0]["answer"] == "tea"
    if framework.tasks:
        assert steps["ask"]["answer"] == answers[0]
    else:
        assert steps["ask"]["answer"]["status"] == "accepted"
    assert len(delivered) == 3


@pytest.mark.parametrize("framework", [f for f in FRAMEWORKS if not f.tasks], ids=lambda f: f.name)
def test_the_agent_without_tasks_sees_the_persons_answer(stack: Stack, framework: Framework) -> None:
    """Through operation_status: the result the Agent's backend is delivered, under its tool_call_id
    (the OpenAI Agents SDK names the question by it; LangChain reads the latest call)."""
    conversation_id, steps = loop(stack, framework)
    (answer,) = [d for d in stack.wait_delivered(conversation_id, 3) if d["tool"] == "interact.ask"]
    ask_ending = steps["ask_ending"]
    assert ask_ending["result"] == answer["result"]
    assert ask_ending["tool_call_id"] == answer["tool_call_id"] == steps["ask"]["answer"]["tool_call_id"]

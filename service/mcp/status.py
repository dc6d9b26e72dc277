"""``operation_status``: how a long call ended, for MCP clients that do not take tasks.

A client that declares MCP tasks learns an operation's ending, or the person's answer to a
question, from its task. Many agent frameworks do not (the OpenAI Agents SDK, LangChain's MCP
adapters): their model sees only the ``202`` acceptance. This read-only tool, listed to every
client beside the apps' tools, answers a long-running call of the conversation — the one its
``tool_call_id`` names, else the latest: an operation (whatever app's) or a question
(``interact.ask``) — and, once it has ended (the operation final, the question answered), the very
``result`` object the relay delivers to the Agent's webhook, with the same ``tool_call_id`` (and an
operation's ``operation_id``), so an agent that also gets the webhook counts the ending once. An
operation its app failed answers ``state`` ``failed`` and the result with its ``error``; the
``operation_status`` call itself succeeded, so its own ``isError`` stays false.

It is bound to the conversation as ``pomodoro.interrupt`` is (the Agent names it in ``_meta`` or
the ``Lineup-Conversation-Id`` header; a person's token binds their own, and a ``tool_call_id`` it
names is read in that person's namespace). One statement reads the call. ``wait_seconds`` (at most
``MAX_WAIT_SECONDS``: the OpenAI Agents SDK times a tool out at 5 s) waits for a focusing operation
to end or a pending question to be answered, woken by the projection hub's after-commit wake-ups of
the conversation (this replica's at once, another's through its NOTIFY) and at an operation's
deadline — never a sleep loop.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import mcp_types as types
import msgspec
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from service.mcp.binding import TOOL_NAME, Binding, named_call_id
from service.mcp.tasks import WORKING_STATES, failure, until_final
from service.projection_hub import ProjectionHub
from service.use_cases import tasks
from service.use_cases.runtime import Runtime

NAME = "operation_status"
#: The longest wait a call may ask for: under the 5 s the OpenAI Agents SDK gives a tool call.
MAX_WAIT_SECONDS = 4.0

INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "tool_call_id": {
            "type": "string",
            "minLength": 1,
            "description": "The tool_call_id a long-running call answered with (the 'accepted' "
            "answer's tool_call_id), to ask about that call; leave it out for the latest one.",
        },
        "wait_seconds": {
            "type": "number",
            "minimum": 0,
            "maximum": MAX_WAIT_SECONDS,
            "default": 0,
            "description": "While the call is still running (or the question still waits for the "
            "person), wait up to this many seconds for its ending before answering (0: answer at "
            "once).",
        },
    },
}

TOOL = types.Tool(
    name=NAME,
    title=NAME,  # as every listed tool: its own name (service.tool_names); it has no dotted one
    description=(
        "How a long-running tool call of the conversation (a focus period, or a question put to "
        "the person) is doing: its state, and once it has ended, its result (how the period ended, "
        "or the person's answer) with its tool_call_id. Read-only. Call it after a call that "
        "answered 'accepted' to learn how it ended (give that call's tool_call_id, or nothing for "
        "the latest call); count each tool_call_id's result once."
    ),
    input_schema=INPUT_SCHEMA,
    annotations=types.ToolAnnotations(
        title="Operation status", read_only_hint=True, destructive_hint=False, idempotent_hint=True
    ),
    meta={TOOL_NAME: NAME},
)

_FIELDS = ("operation_id", "tool", "tool_call_id", "state", "reason", "started_at", "ends_at", "finalized_at")


def _call_id(arguments: dict[str, Any]) -> str | None:
    named = arguments.get("tool_call_id")
    return None if named is None else named_call_id(named, "arguments.tool_call_id")


def _wait(arguments: dict[str, Any]) -> float:
    unknown = sorted(set(arguments) - set(INPUT_SCHEMA["properties"]))
    if unknown:
        raise MCPError(
            INVALID_PARAMS,
            f"{NAME} takes only tool_call_id and wait_seconds, not {unknown}",
            data={"field": unknown[0]},
        )
    wait = arguments.get("wait_seconds", 0)
    if isinstance(wait, bool) or not isinstance(wait, int | float) or not 0 <= wait <= MAX_WAIT_SECONDS:
        raise MCPError(
            INVALID_PARAMS,
            f"wait_seconds must be a number from 0 to {MAX_WAIT_SECONDS:g}",
            data={"field": "arguments.wait_seconds"},
        )
    return float(wait)


def body(conversation_id: str, call: dict[str, Any] | None) -> dict[str, Any]:
    """The answer: the call's fields (all null without one) and ``result`` once it has ended."""
    if call is None:
        return {"conversation_id": conversation_id, **dict.fromkeys(_FIELDS), "result": None}
    return {
        "conversation_id": conversation_id,
        **{name: call[name] for name in _FIELDS},
        "result": None if call["state"] in WORKING_STATES else call["result"],
    }


def _sentence(answer: dict[str, Any], named: str | None) -> str:
    if answer["tool_call_id"] is None:
        if named is not None:
            return f"This conversation has no long-running tool call {named!r}."
        return "This conversation has no long-running tool call."
    call = f"{answer['tool']} (tool_call_id {answer['tool_call_id']})"
    result = answer["result"]
    if result is None and answer["operation_id"] is None:
        return f"{call} still waits for the person's answer."
    if result is None:
        return f"{call} is still running, until {answer['ends_at']}."
    if answer["operation_id"] is None:
        return f"{call}: the person answered {result.get('answer')!r}; count this result once."
    error = failure(result)
    if error is not None:
        return (
            f"{call} failed ({result.get('reason')}): {error.get('message')} ({error.get('code')}); "
            "count this result once."
        )
    return f"{call} ended {result.get('state')} ({result.get('reason')}); count this result once."


async def call(
    rt: Runtime, hub: ProjectionHub, binding: Binding, arguments: dict[str, Any] | None
) -> dict[str, Any]:
    """The ``CallToolResult`` (as a dict) of one ``operation_status`` call."""
    arguments = arguments or {}
    wait = _wait(arguments)
    named = _call_id(arguments)
    conversation_id = binding.conversation_id
    found = await tasks.long_call(rt, conversation_id, named)
    if found is not None and found["state"] in WORKING_STATES and wait > 0:

        async def read() -> dict[str, Any]:
            again = await tasks.long_call(rt, conversation_id, named)
            # Neither a focusing operation nor a pending question is ever removed; nor, then, the
            # latest call of a conversation that has one.
            assert again is not None
            return again

        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(wait):
                found = await until_final(hub, read, found)
    answer = body(conversation_id, found)
    text = f"{_sentence(answer, named)}\n{msgspec.json.encode(answer).decode()}"
    return {
        "content": [{"type": "text", "text": text}],
        "structuredContent": answer,
        "isError": False,
        "_meta": {},
    }

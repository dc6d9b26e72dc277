"""``operation_status``: how a long call ended, for MCP clients that do not take tasks.

A client that declares MCP tasks learns an operation's ending from its task. Many agent
frameworks do not (the OpenAI Agents SDK, LangChain's MCP adapters): their model sees only the
``202`` acceptance. This read-only tool, listed to every client beside the apps' tools, answers
the conversation's latest operation — whatever app's — and, once it has ended, the very ``result``
object the relay delivers to the Agent's webhook, with the same ``operation_id`` and
``tool_call_id``, so an agent that also gets the webhook counts the ending once.

It is bound to the conversation as ``pomodoro.interrupt`` is (the Agent names it in ``_meta`` or
the ``Lineup-Conversation-Id`` header; a person's token binds their own). ``wait_seconds`` (at
most ``MAX_WAIT_SECONDS``: the OpenAI Agents SDK times a tool out at 5 s) waits for a focusing
operation to end, woken by the projection hub's after-commit wake-ups of the conversation (this
replica's at once, another's through its NOTIFY) and at its deadline — never a sleep loop.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import mcp_types as types
import msgspec
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from service.mcp.binding import TOOL_NAME, Binding
from service.mcp.tasks import until_final
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
        "wait_seconds": {
            "type": "number",
            "minimum": 0,
            "maximum": MAX_WAIT_SECONDS,
            "default": 0,
            "description": "While the operation is still running, wait up to this many seconds for "
            "it to end before answering (0: answer at once).",
        }
    },
}

TOOL = types.Tool(
    name=NAME,
    title=NAME,  # as every listed tool: its own name (service.tool_names); it has no dotted one
    description=(
        "How the conversation's latest long-running tool call (for example a focus period) is "
        "doing: its state, and once it has ended, its result (state, reason and figures) with its "
        "operation_id. Read-only. Call it after a call that answered 'accepted' to learn how it "
        "ended; count each operation_id's result once."
    ),
    input_schema=INPUT_SCHEMA,
    annotations=types.ToolAnnotations(
        title="Operation status", read_only_hint=True, destructive_hint=False, idempotent_hint=True
    ),
    meta={TOOL_NAME: NAME},
)

_FIELDS = ("operation_id", "tool", "tool_call_id", "state", "reason", "started_at", "ends_at", "finalized_at")


def _wait(arguments: dict[str, Any] | None) -> float:
    arguments = arguments or {}
    unknown = sorted(set(arguments) - {"wait_seconds"})
    if unknown:
        raise MCPError(
            INVALID_PARAMS, f"{NAME} takes only wait_seconds, not {unknown}", data={"field": unknown[0]}
        )
    wait = arguments.get("wait_seconds", 0)
    if isinstance(wait, bool) or not isinstance(wait, int | float) or not 0 <= wait <= MAX_WAIT_SECONDS:
        raise MCPError(
            INVALID_PARAMS,
            f"wait_seconds must be a number from 0 to {MAX_WAIT_SECONDS:g}",
            data={"field": "arguments.wait_seconds"},
        )
    return float(wait)


def body(conversation_id: str, operation: dict[str, Any] | None) -> dict[str, Any]:
    """The answer: the operation's fields (all null without one) and ``result`` once final."""
    if operation is None:
        return {"conversation_id": conversation_id, **dict.fromkeys(_FIELDS), "result": None}
    return {
        "conversation_id": conversation_id,
        **{name: operation[name] for name in _FIELDS},
        "result": operation["result"] if operation["state"] != "focusing" else None,
    }


def _sentence(answer: dict[str, Any]) -> str:
    if answer["operation_id"] is None:
        return "This conversation has no long-running tool call."
    result = answer["result"]
    if result is None:
        return f"{answer['tool']} ({answer['operation_id']}) is still running, until {answer['ends_at']}."
    return (
        f"{answer['tool']} ({answer['operation_id']}) ended {result.get('state')} "
        f"({result.get('reason')}); count this result once."
    )


async def call(
    rt: Runtime, hub: ProjectionHub, binding: Binding, arguments: dict[str, Any] | None
) -> dict[str, Any]:
    """The ``CallToolResult`` (as a dict) of one ``operation_status`` call."""
    wait = _wait(arguments)
    conversation_id = binding.conversation_id
    operation = await tasks.latest_operation(rt, conversation_id)
    if operation is not None and operation["state"] == "focusing" and wait > 0:

        async def read() -> dict[str, Any]:
            latest = await tasks.latest_operation(rt, conversation_id)
            assert latest is not None  # operations are never removed while focusing
            return latest

        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(wait):
                operation = await until_final(hub, read, operation)
    answer = body(conversation_id, operation)
    return {
        "content": [{"type": "text", "text": f"{_sentence(answer)}\n{msgspec.json.encode(answer).decode()}"}],
        "structuredContent": answer,
        "isError": False,
        "_meta": {},
    }

"""``tools/list`` and ``tools/call``: the manifests' tools, and the one tool-call use case.

A call is checked exactly as ``POST /v1/tool-calls`` checks it and fingerprinted as the REST body
it stands for (``{"tool_call_id", "conversation_id", "tool", "arguments"}``), so the same
``tool_call_id`` replays the same answer over either face and other arguments are
``idempotency_key_reused``. The result's ``structuredContent`` is that REST body, ``isError`` is
set for a 4xx, and ``content`` carries one sentence for a person followed by the JSON.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import mcp_types as types
import msgspec

from service.api.errors import status_of, status_of_outcome
from service.domain.errors import InvalidArguments, InvalidRequest, Refusal, UnknownTool
from service.domain.idempotency import fingerprint
from service.manifests import Registry, ToolSpec
from service.mcp.binding import HTTP_STATUS, TOOL_CALL_ID, Binding
from service.metrics import TOOL_CALLS
from service.use_cases.runtime import Runtime
from service.use_cases.tool_calls import ToolCall, call_tool

#: Tools whose accepted answer opens an operation: an MCP client may run them as tasks.
TASK_TOOLS = frozenset({"pomodoro.start"})

_ANNOTATIONS = {
    "pomodoro.start": types.ToolAnnotations(
        title="Start a focus period", read_only_hint=False, destructive_hint=False, idempotent_hint=True
    ),
    "pomodoro.interrupt": types.ToolAnnotations(
        title="Stop the focus period", read_only_hint=False, destructive_hint=True, idempotent_hint=True
    ),
    "interact.ask": types.ToolAnnotations(
        title="Ask the person", read_only_hint=False, destructive_hint=False, idempotent_hint=True
    ),
}


def list_tools(registry: Registry) -> types.ListToolsResult:
    """One MCP tool per manifest tool: its name, description and input schema unchanged."""
    tools = []
    for name in sorted(registry.tools):
        spec = registry.tools[name]
        tools.append(
            types.Tool(
                name=spec.name,
                description=spec.description,
                input_schema=spec.input_schema,
                annotations=_ANNOTATIONS.get(name),
                execution=types.ToolExecution(task_support="optional") if name in TASK_TOOLS else None,
            )
        )
    return types.ListToolsResult(tools=tools)


@dataclass(frozen=True, slots=True)
class Answer:
    """What ``POST /v1/tool-calls`` would have answered for this call."""

    tool: str
    binding: Binding
    status: int
    body: dict[str, Any]
    replayed: bool = False

    @property
    def operation_id(self) -> str | None:
        """The operation an accepted call opened (or, replayed, had opened)."""
        operation = self.body.get("operation") if self.status == 202 else None
        return str(operation["operation_id"]) if isinstance(operation, dict) else None


def _refusal(tool: str, binding: Binding, refusal: Refusal) -> Answer:
    return Answer(tool, binding, status_of(refusal), refusal.body())


def _nul_paths(value: Any, path: str) -> list[str]:
    if isinstance(value, str):
        return [path] if "\x00" in value else []
    if isinstance(value, dict):
        found: list[str] = []
        for key, item in value.items():
            key_path = f"{path}.{key}"
            found += ([key_path] if "\x00" in key else []) + _nul_paths(item, key_path)
        return found
    if isinstance(value, list):
        return [p for i, item in enumerate(value) for p in _nul_paths(item, f"{path}[{i}]")]
    return []


def _checked(spec: ToolSpec | None, name: str, arguments: dict[str, Any]) -> Refusal | None:
    """The refusal REST gives before anything is recorded (404, 422), or None."""
    if spec is None:
        TOOL_CALLS.labels("unknown", "unknown_tool").inc()
        return UnknownTool(f"no tool named {name!r}")
    if nul := _nul_paths(arguments, "arguments"):
        return InvalidRequest(
            "strings may not contain U+0000",
            details=[{"path": p, "message": "contains U+0000"} for p in nul],
        )
    details = spec.validate_arguments(arguments)
    if details:
        TOOL_CALLS.labels(name, "invalid_arguments").inc()
        return InvalidArguments(
            f"the arguments do not match the input schema of {name}",
            details=[d.as_dict() for d in details],
        )
    return None


async def run_tool(rt: Runtime, name: str, arguments: dict[str, Any] | None, binding: Binding) -> Answer:
    """Decide (or replay) one MCP tool call through the use case ``POST /v1/tool-calls`` uses."""
    arguments = {} if arguments is None else arguments
    refusal = _checked(rt.registry.tool(name), name, arguments)
    if refusal is not None:
        return _refusal(name, binding, refusal)
    rest_body = {
        "tool_call_id": binding.tool_call_id,
        "conversation_id": binding.conversation_id,
        "tool": name,
        "arguments": arguments,
    }
    decided = dict(arguments)
    if isinstance(decided.get("duration_seconds"), float):
        decided["duration_seconds"] = int(decided["duration_seconds"])
    call = ToolCall(binding.tool_call_id, binding.conversation_id, name, decided)
    answer = await call_tool(rt, call, fingerprint(rest_body))
    status = status_of_outcome(answer.outcome)
    return Answer(name, binding, status, msgspec.json.decode(answer.body), answer.replayed)


def sentence(answer: Answer) -> str:
    """One sentence for a person: what the call did."""
    body = answer.body
    if answer.status >= 400:
        return f"{answer.tool} was refused ({body.get('error')}): {body.get('message', '')}".rstrip(": ")
    status = body.get("status")
    if answer.tool == "pomodoro.start" and status == "accepted":
        operation = body["operation"]
        return (
            f"A {operation['duration_seconds']}-second focus period started; it ends at "
            f"{operation['ends_at']} unless it is stopped first."
        )
    if status == "interrupted":
        return "The focus period was stopped."
    if status == "operation_already_final":
        return f"The latest focus period had already ended ({body.get('final_state')})."
    if status == "no_active_focusing_operation":
        return "No focus period is running in this conversation."
    if answer.tool == "interact.ask" and status == "accepted":
        return "The question is waiting for the person; their answer arrives as the result."
    return f"{answer.tool}: {status}."


def wire(result: types.Result) -> dict[str, Any]:
    """A result dumped for the handshake-era wire, for answers the SDK's result check does not see
    (task methods, a task-augmented call): without the 2026-07-28 ``resultType``."""
    dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    dumped.pop("resultType", None)
    return dumped


def call_result(answer: Answer) -> dict[str, Any]:
    """The ``CallToolResult`` on the wire (built as a dict: it is on every call's path)."""
    body_text = msgspec.json.encode(answer.body).decode()
    return {
        "content": [{"type": "text", "text": f"{sentence(answer)}\n{body_text}"}],
        "structuredContent": answer.body,
        "isError": 400 <= answer.status < 500,
        "_meta": {TOOL_CALL_ID: answer.binding.tool_call_id, HTTP_STATUS: answer.status},
    }

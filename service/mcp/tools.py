"""``tools/list`` and ``tools/call``: the manifests' tools, and the one tool-call use case.

A call goes through the use case ``POST /v1/tool-calls`` uses (``service.use_cases.tool_calls``):
the same checks, and the fingerprint of the REST body it stands for, so the same ``tool_call_id``
replays the same answer over either face and other arguments are ``idempotency_key_reused``. The
result's ``structuredContent`` is that REST body, ``isError`` is set for a 4xx (``service.http``),
and ``content`` carries the Tool's sentence for a person followed by the JSON, or, for an answer
that is not a refusal, the content the Tool gives itself (``Registration.content``,
``service.mcp.content``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import mcp_types as types
import msgspec
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from service.domain.errors import Refusal
from service.domain.outcomes import Accepted
from service.http import status_of, status_of_kind
from service.manifests import Registry
from service.mcp.app_resource import tool_views
from service.mcp.binding import HTTP_STATUS, TOOL_CALL_ID, TOOL_NAME, Binding
from service.mcp.content import own_content
from service.tool_names import listed_name
from service.tools import Opens
from service.use_cases.runtime import Runtime
from service.use_cases.tool_calls import ToolCallRequest, call_tool


def runs_as_task(registry: Registry, name: object, *, extension: bool) -> bool:
    """Whether an accepted call of the tool ``name`` can be awaited as a task: at 2025-11-25 one
    that opens an operation (the task is the operation), with the 2026-07-28 extension also one
    that opens an interaction."""
    runner = registry.runners.get(name) if isinstance(name, str) else None
    return runner is not None and runner.opens is not None and (extension or runner.opens == "operation")


def list_tools(registry: Registry) -> types.ListToolsResult:
    """One MCP tool per manifest tool, listed under its provider-safe name (``pomodoro_start``,
    ``service.tool_names``) with the manifest's own name as its ``title`` and in ``_meta``
    (``TOOL_NAME``); its description and input schema unchanged, with the annotations of its
    registration; a tool that has an MCP App names it (``_meta.ui.resourceUri``)."""
    tools = []
    views = tool_views(registry)
    for name in sorted(registry.tools):
        spec, hints = registry.tools[name], registry.runner(name).hints
        meta: dict[str, Any] = {TOOL_NAME: spec.name}
        if name in views:
            meta["ui"] = {"resourceUri": views[name]}
        tools.append(
            types.Tool(
                name=listed_name(spec.name),
                title=spec.name,
                description=spec.description,
                input_schema=spec.input_schema,
                annotations=types.ToolAnnotations(
                    title=hints.title,
                    read_only_hint=hints.read_only,
                    destructive_hint=hints.destructive,
                    idempotent_hint=hints.idempotent,
                ),
                execution=types.ToolExecution(task_support="optional")
                if runs_as_task(registry, name, extension=False)
                else None,
                meta=meta,
            )
        )
    return types.ListToolsResult(tools=tools)


@dataclass(frozen=True, slots=True)
class Answer:
    """What ``POST /v1/tool-calls`` would have answered for this call."""

    tool: str
    binding: Binding
    kind: type  # Accepted, Answered, or the kind of refusal (service.domain)
    status: int  # the kind's HTTP status (service.http), which MCP reports beside the result
    body: dict[str, Any]
    replayed: bool = False
    opens: Opens | None = None  # what an accepted call of this tool opens
    sentence: str = ""
    content: list[dict[str, Any]] | None = None  # the Tool's own content, checked (service.mcp.content)

    @property
    def accepted(self) -> bool:
        """The Tool accepted the call: what it opened goes on, its result comes through the outbox."""
        return self.kind is Accepted

    @property
    def operation_id(self) -> str | None:
        """The operation an accepted call opened (or, replayed, had opened)."""
        operation = self.body.get("operation") if self.kind is Accepted else None
        return str(operation["operation_id"]) if isinstance(operation, dict) else None


def unknown_tool(name: str) -> MCPError:
    """A tool this server does not list is a protocol error at every revision (2025-06-18 on),
    not a tool result; REST answers the same call ``404 unknown_tool``."""
    return MCPError(INVALID_PARAMS, f"Unknown tool: {name}", data={"error": "unknown_tool", "tool": name})


async def run_tool(rt: Runtime, name: str, arguments: dict[str, Any] | None, binding: Binding) -> Answer:
    """Decide (or replay) one MCP tool call through the use case ``POST /v1/tool-calls`` uses."""
    if name not in rt.registry.tools:
        raise unknown_tool(name)
    request = ToolCallRequest(binding.tool_call_id, binding.conversation_id, name, arguments or {})
    try:
        answer = await call_tool(rt, request)
    except Refusal as refusal:
        body = refusal.body()
        return Answer(name, binding, type(refusal), status_of(refusal), body, sentence=_refused(name, body))
    runner = rt.registry.runner(name)
    decoded = msgspec.json.decode(answer.body)
    refused = issubclass(answer.kind, Refusal)
    content = None if refused or runner.content is None else own_content(name, runner.content, decoded)
    return Answer(
        name,
        binding,
        answer.kind,
        status_of_kind(answer.kind),
        decoded,
        answer.replayed,
        runner.opens,
        _refused(name, decoded) if refused else runner.sentence(decoded),
        content,
    )


def _refused(tool: str, body: dict[str, Any]) -> str:
    return f"{tool} was refused ({body.get('error')}): {body.get('message', '')}".rstrip(": ")


def wire(result: types.Result) -> dict[str, Any]:
    """A result dumped for the handshake-era wire, for answers the SDK's result check does not see
    (task methods, a task-augmented call): without the 2026-07-28 ``resultType``."""
    dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    dumped.pop("resultType", None)
    return dumped


def call_result(answer: Answer) -> dict[str, Any]:
    """The ``CallToolResult`` on the wire (built as a dict: it is on every call's path)."""
    if answer.content is not None:
        content = answer.content
    else:
        body_text = msgspec.json.encode(answer.body).decode()
        content = [{"type": "text", "text": f"{answer.sentence}\n{body_text}"}]
    return {
        "content": content,
        "structuredContent": answer.body,
        "isError": 400 <= answer.status < 500,
        "_meta": {TOOL_CALL_ID: answer.binding.tool_call_id, HTTP_STATUS: answer.status},
    }

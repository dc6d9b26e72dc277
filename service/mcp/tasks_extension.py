"""Tasks at 2026-07-28: the extension ``io.modelcontextprotocol/tasks`` (no sessions, any replica).

A request that declares the extension in its ``_meta`` client capabilities may get a task instead
of a tool result: ``pomodoro.start`` and ``interact.ask``, when their call opens something (a
refusal or a replayed refusal is the tool's result as ever). The call has committed before the
``CreateTaskResult`` is sent, so ``tasks/get`` on any replica finds it at once.

* the task id: an operation's ``operation_id`` (a version 7 UUID: 74 random bits); an
  interaction's random ``interaction_tasks`` id (v4) — never the caller's ``tool_call_id``. A task
  request that names a conversation (``_meta["io.lineup/conversation_id"]``) sees a task of another
  conversation exactly as an unknown one.
* ``working`` while focusing (or waiting for the person's answer), then ``completed`` with the
  tool's result: a ``CallToolResult`` whose ``structuredContent`` is the result object the relay
  delivers, whichever way it ended. At this revision only a completed task carries a result, and
  every focus period has exactly one, so a period the Agent interrupted is ``completed`` too, its
  result saying ``interrupted (agent_interrupt)``; ``cancelled`` and ``failed`` are never used.
* ``tasks/cancel``: the Agent's interrupt of that one operation (the same compare-and-set as
  ``pomodoro.interrupt``), answered with the empty acknowledgement whoever wins the race; an
  interaction waits for the person, so cancelling it changes nothing (the extension's cancel is
  cooperative).
* ``input_required``: an interaction's task, still waiting, read by a request that declares
  elicitation (``_meta`` client capabilities): its question is in ``inputRequests`` under
  ``"answer"``, an ``elicitation/create`` request (``service.mcp.elicitation``). Without the
  declaration it reads ``working``, as before; operations never ask for input.
* ``tasks/update``: an accepted ``inputResponses["answer"]`` answers the question exactly as the
  Host's answer does (one decision: whichever comes first wins); any other key, a declined or
  cancelled response, or a question already answered changes nothing (the extension says to ignore
  responses to keys that are not outstanding): acknowledged.
* An app's question of its own forms (``app_ask``): one input request per form not yet answered,
  under the form's key; ``tasks/update`` answers any of them (each form once, the others stay
  ``input_required``), an accepted content that does not fit its form is ``-32602`` (nothing
  stored), and the task completes when the last form is answered.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import MCP_NAME_HEADER, decode_header_value
from mcp_types import HEADER_MISMATCH, MISSING_REQUIRED_CLIENT_CAPABILITY, RequestParams
from pydantic import Field

from service.domain.errors import NotFound
from service.mcp import elicitation
from service.mcp.binding import bound_conversation
from service.mcp.tasks import POLL_INTERVAL_MS, ended, unknown_task
from service.mcp.tools import Answer
from service.use_cases import interactions, tasks
from service.use_cases.operation_interrupt import interrupt_operation
from service.use_cases.runtime import Runtime

Ctx = ServerRequestContext[Any, Any]

EXTENSION = "io.modelcontextprotocol/tasks"
_WORKING = frozenset({"focusing", "pending"})


class UpdateTaskRequestParams(RequestParams):
    task_id: str = Field(alias="taskId")
    input_responses: dict[str, Any] = Field(alias="inputResponses")


def declares(ctx: Ctx) -> bool:
    """Whether this request's ``_meta`` client capabilities declare the extension."""
    capabilities = ctx.session.client_capabilities
    return capabilities is not None and EXTENSION in (capabilities.extensions or {})


def missing_capability() -> MCPError:
    return MCPError(
        MISSING_REQUIRED_CLIENT_CAPABILITY,
        "Missing required client capability",
        data={"requiredCapabilities": {"extensions": {EXTENSION: {}}}},
    )


def checked(ctx: Ctx, task_id: str) -> str | None:
    """The checks of every task request; the conversation it names, if any.

    Not declaring the extension on the request is ``-32021``; an ``Mcp-Name`` header (which the
    extension has clients set to the task id, for routing) that names another task is a header
    mismatch, as the core protocol answers for the methods it names."""
    if not declares(ctx):
        raise missing_capability()
    headers = getattr(ctx.request, "headers", None)
    named = headers.get(MCP_NAME_HEADER) if headers is not None else None
    if named is not None and decode_header_value(named) != task_id:
        raise MCPError(HEADER_MISMATCH, f"{MCP_NAME_HEADER} header does not match the request's taskId")
    return bound_conversation((ctx.params or {}).get("_meta"))


def _task_uuid(task_id: str) -> UUID:
    try:
        return UUID(task_id)
    except ValueError:
        raise unknown_task(task_id) from None


async def read(rt: Runtime, task_id: str, conversation_id: str | None = None) -> dict[str, Any]:
    """The task (``service.use_cases.tasks``); another conversation's answers as an unknown one."""
    task = await tasks.read_task(rt, _task_uuid(task_id), conversation_id)
    if task is None:
        raise unknown_task(task_id)
    return task


def _status_message(task: dict[str, Any]) -> str:
    if task["kind"] == "interaction":
        return "waiting for the person's answer" if task["state"] == "pending" else "answered"
    if task["state"] == "focusing":
        return f"focusing until {task['ends_at']}"
    return f"{task['state']} ({task['reason']})"


def _tool_result(task: dict[str, Any]) -> dict[str, Any]:
    result = task["result"]
    text = elicitation.answered_text(result) if task["kind"] == "interaction" else ended(result)
    return {"content": [{"type": "text", "text": text}], "structuredContent": result, "isError": False}


def task_wire(task: dict[str, Any]) -> dict[str, Any]:
    """The extension's ``Task`` (``ttlMs`` null: tasks are kept, they never expire)."""
    return {
        "taskId": task["task_id"],
        "status": "working" if task["state"] in _WORKING else "completed",
        "statusMessage": _status_message(task),
        "createdAt": task["started_at"],
        "lastUpdatedAt": task["finalized_at"] or task["started_at"],
        "ttlMs": None,
        "pollIntervalMs": POLL_INTERVAL_MS,
    }


def detailed(task: dict[str, Any]) -> dict[str, Any]:
    """The ``DetailedTask`` that ``tasks/get`` answers (and ``notifications/tasks`` carries)."""
    wire = task_wire(task)
    if wire["status"] == "completed":
        wire["result"] = _tool_result(task)
    return wire


async def created(rt: Runtime, answer: Answer, meta: dict[str, Any]) -> dict[str, Any] | None:
    """The ``CreateTaskResult`` for an accepted call, or None when it opened nothing."""
    if not answer.accepted:
        return None
    if answer.opens == "interaction":
        task = await tasks.interaction_task(rt, answer.binding.tool_call_id, answer.binding.conversation_id)
        if task is None:
            return None
    elif answer.operation_id is None:
        return None
    elif answer.replayed:  # the answer is as it was then: the task is as it is now
        task = await read(rt, answer.operation_id)
    else:
        operation = answer.body["operation"]
        task = {"kind": "operation", "task_id": answer.operation_id, "reason": None, "finalized_at": None}
        task |= {key: operation[key] for key in ("state", "started_at", "ends_at")}
    return {"resultType": "task", **task_wire(task), "_meta": meta}


async def _asked(rt: Runtime, ctx: Ctx, task: dict[str, Any]) -> dict[str, Any] | None:
    """The interaction a waiting interaction's task asks this request's client, if it can answer."""
    if task["kind"] != "interaction" or task["state"] != "pending":
        return None
    if not elicitation.elicits(ctx.session.client_capabilities):
        return None
    return await interactions.asked_by_task(rt, _task_uuid(task["task_id"]))


async def get(rt: Runtime, ctx: Ctx, task_id: str) -> dict[str, Any]:
    task = await read(rt, task_id, checked(ctx, task_id))
    wire = detailed(task)
    asked = await _asked(rt, ctx, task)
    if asked is not None and asked["status"] == "pending":
        wire["status"] = "input_required"
        wire["statusMessage"] = "waiting for the person's answer: answer it with tasks/update"
        wire["inputRequests"] = _input_requests(asked)
    return wire


def _input_requests(asked: dict[str, Any]) -> dict[str, Any]:
    """What a waiting question asks: interact.ask's one question under ``"answer"``, or each of an
    app's forms not yet answered under its own key."""
    if "forms" not in asked:
        return {elicitation.ANSWER_KEY: elicitation.input_request(asked["prompt"], list(asked["choices"]))}
    return {
        key: elicitation.form_request(form)
        for key, form in asked["forms"].items()
        if key not in asked["answers"]
    }


async def cancel(rt: Runtime, ctx: Ctx, task_id: str) -> dict[str, Any]:
    conversation_id = checked(ctx, task_id)
    task_uuid = _task_uuid(task_id)
    try:
        await interrupt_operation(rt, task_uuid, conversation_id=conversation_id)
    except NotFound:
        await read(rt, task_id, conversation_id)  # an interaction's task: acknowledged, unchanged
    return {}


async def update(rt: Runtime, ctx: Ctx, task_id: str, responses: dict[str, Any]) -> dict[str, Any]:
    task = await read(rt, task_id, checked(ctx, task_id))
    if task["kind"] != "interaction" or task["state"] != "pending":
        return {}
    asked = await interactions.asked_by_task(rt, _task_uuid(task_id))
    if asked is None:
        return {}
    if "forms" in asked:
        given = {
            key: content
            for key, response in responses.items()
            if key in asked["forms"] and (content := elicitation.accepted_content(response)) is not None
        }
        if given:
            await elicitation.record_forms(rt, asked["tool_call_id"], asked["conversation_id"], given)
        return {}
    text = elicitation.accepted_text(responses.get(elicitation.ANSWER_KEY))
    if text is not None:
        await elicitation.record(rt, asked["tool_call_id"], asked["conversation_id"], text)
    return {}

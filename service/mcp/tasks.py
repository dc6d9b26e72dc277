"""Operations as MCP tasks (the 2025-11-25 task wire, whose types the SDK ships).

The task id is the ``operation_id``, and a task is only ever read from the ``operations`` row, so a
restart loses none and any replica answers for any task. ``working`` while focusing; once final,
``completed`` when the period reached its deadline, ``cancelled`` when anything stopped it
first (the Agent's interrupt, the person leaving, the app closed — the result says which) and
``failed`` when its app's decision failed it (the revision's words: a failed tool call, whose result
has ``isError``, is a ``failed`` task). The task's result is a ``CallToolResult`` whose
``structuredContent`` is the result object the relay delivers, ``isError`` for a failed operation;
one that failed with ``internal_error`` (a protocol-level error, ``protocol_error``) answers
``tasks/result`` with that JSON-RPC error instead. Cancelling a task is the Agent's interrupt of
that one operation.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any
from uuid import UUID

import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS

from service.clock import CLOCK
from service.domain.errors import NotFound
from service.mcp.tools import wire
from service.projection_hub import ProjectionHub
from service.use_cases import tasks
from service.use_cases.operation_interrupt import interrupt_operation
from service.use_cases.runtime import Runtime

RELATED_TASK = "io.modelcontextprotocol/related-task"
#: How often a client that cannot take pushes should ask (the push arrives at once otherwise).
POLL_INTERVAL_MS = 5000
#: A waiter re-reads at the deadline, on every wake-up of the conversation, and at least this often
#: (the wake-ups' own safety net: a lost NOTIFY only delays).
SAFETY_POLL_SECONDS = 30.0


#: The error code with which an app says its operation failed inside (not a tool execution error the
#: model can act on): a protocol-level error on MCP (``protocol_error``).
INTERNAL = "internal_error"


def failure(result: dict[str, Any]) -> dict[str, Any] | None:
    """The error of a failed operation's result object (None for any other ending)."""
    error = result.get("error") if result.get("state") == "failed" else None
    return error if isinstance(error, dict) else None


def protocol_error(result: dict[str, Any]) -> dict[str, Any] | None:
    """The JSON-RPC error (``code``, ``message``, ``data``: the result object) for an operation
    that failed with ``internal_error``; None for any other ending, a failed one's included."""
    error = failure(result)
    if error is None or error.get("code") != INTERNAL:
        return None
    return {"code": INTERNAL_ERROR, "message": str(error.get("message")), "data": result}


def task_status(operation: dict[str, Any]) -> types.TaskStatus:
    if operation["state"] == "focusing":
        return "working"
    if operation["state"] == "failed":
        return "failed"
    return "completed" if operation["state"] == "completed" else "cancelled"


def task_view(operation: dict[str, Any]) -> dict[str, Any]:
    """The wire ``Task`` (``ttl`` null: operations are kept, the task never expires)."""
    if operation["state"] == "focusing":
        message = f"focusing until {operation['ends_at']}"
    else:
        message = f"{operation['state']} ({operation['reason']})"
    return {
        "taskId": operation["operation_id"],
        "status": task_status(operation),
        "statusMessage": message,
        "createdAt": operation["started_at"],
        "lastUpdatedAt": operation.get("finalized_at") or operation["started_at"],
        "ttl": None,
        "pollInterval": POLL_INTERVAL_MS,
    }


def ended(result: dict[str, Any]) -> str:
    """One sentence for a person: how a focus period ended (from the relay's result object)."""
    state, reason, seconds = result["state"], result["reason"], result["focused_seconds"]
    error = failure(result)
    if error is not None:
        message, code = error.get("message"), error.get("code")
        return f"The operation failed ({reason}) after {seconds} s: {message} ({code})."
    return f"The focus period ended {state} ({reason}) after {seconds} s."


def task_result(operation: dict[str, Any]) -> dict[str, Any]:
    """What ``tasks/result`` answers for a final operation: the tool's result, as a tool result
    (``isError`` when it failed). One that failed with ``internal_error`` raises its JSON-RPC error
    (the revision: ``tasks/result`` returns the error the request would have)."""
    result = operation["result"]
    error = protocol_error(result)
    if error is not None:
        raise MCPError(error["code"], error["message"], data=error["data"])
    return wire(
        types.CallToolResult(
            content=[types.TextContent(type="text", text=ended(result))],
            structured_content=result,
            is_error=failure(result) is not None,
            _meta={RELATED_TASK: {"taskId": operation["operation_id"]}},
        )
    )


def operation_uuid(task_id: str) -> UUID:
    try:
        return UUID(task_id)
    except ValueError:
        raise unknown_task(task_id) from None


def unknown_task(task_id: str) -> MCPError:
    return MCPError(INVALID_PARAMS, f"no task {task_id!r}", data={"taskId": task_id})


async def read_task(rt: Runtime, task_id: str) -> dict[str, Any]:
    """The operation behind a task (``service.use_cases.tasks``), keyed as an operation."""
    task = await tasks.read_task(rt, operation_uuid(task_id))
    if task is None or task["kind"] != "operation":
        raise unknown_task(task_id)
    return {"operation_id": task["task_id"], **task}


def _seconds_until(timestamp: str) -> float:
    """Until a time of the database's (an ``ends_at``), by the database's clock (``service.clock``)."""
    return datetime.fromisoformat(timestamp).timestamp() - CLOCK.now()


#: What a task's row says while it is running: an operation focusing, an interaction pending.
WORKING_STATES = frozenset({"focusing", "pending"})


async def until_final(
    hub: ProjectionHub,
    read: Callable[[], Awaitable[dict[str, Any]]],
    known: dict[str, Any],
    *,
    reread: bool = True,
) -> dict[str, Any]:
    """The task's row once final: re-read (``read``) on each after-commit wake-up of its
    conversation (this replica's at once, another's through its NOTIFY), at an operation's deadline
    (where the read settles it) and at least every ``SAFETY_POLL_SECONDS``. ``known``: the row as
    last seen; it is read again once subscribed (so that no wake-up is missed) unless ``reread``
    is false — for a row decided just now, where nothing is read until a wake-up or the deadline."""
    if known["state"] not in WORKING_STATES:
        return known
    with hub.subscribe(known["conversation_id"]) as woken:
        task = await read() if reread else known
        while task["state"] in WORKING_STATES:
            wait = SAFETY_POLL_SECONDS
            if task.get("ends_at"):
                wait = min(max(_seconds_until(task["ends_at"]), 0.0) + 0.01, wait)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await woken.wait()
            woken.clear()
            task = await read()
    return task


async def settled(
    rt: Runtime, hub: ProjectionHub, task_id: str, known: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The operation once final. ``known``: the operation as just decided, when the caller has it
    (then nothing is read until a wake-up or its deadline)."""

    async def read() -> dict[str, Any]:
        return await read_task(rt, task_id)

    if known is None:
        return await until_final(hub, read, await read())
    return await until_final(hub, read, known, reread=False)


async def cancel_task(rt: Runtime, task_id: str) -> dict[str, Any]:
    """The Agent's interrupt of this one operation; a task already final is the protocol's error."""
    try:
        outcome = await interrupt_operation(rt, operation_uuid(task_id))
    except NotFound:
        raise unknown_task(task_id) from None
    operation = await read_task(rt, task_id)
    task = task_view(operation)
    if not outcome.interrupted:
        raise MCPError(
            INVALID_PARAMS,
            f"task {task_id} is already {task['status']}: the focus period ended "
            f"{operation['state']} ({operation['reason']})",
            data=task,
        )
    return task

"""The MCP App's own tools (``_meta.ui.visibility: ["app"]``): what the Pomodoro View needs.

An MCP Apps host forwards the View's ``tools/call`` to this server with the host's credentials (the
Agent's token, or a person's), so these calls are untrusted UI, like the Web Host's SDK requests:

* Each is bound to one operation, the one whose ``pomodoro.start`` result the host gave the View
  (its ``operation_id``, which is also its task id): the server looks the operation up and takes its
  instance and conversation from the row; the View names no instance, conversation or capability.
  A person's token reaches only that person's conversation, and an Agent's request that names a
  conversation in ``_meta`` only that one (as ``tasks/get``); any other operation is unknown.
* They run on the use cases the Web Host's SDK API runs on (``service.use_cases``): reading the
  operation (which settles it when its deadline has passed, as every read does), the instance
  snapshot (``app.instance-state.v1``: its schema, 4 KiB, revision check, read-only after close)
  and the lifecycle close (``cancelled(app_closed)``). None of them can complete or interrupt a
  period: only the deadline, ``pomodoro.interrupt`` / ``tasks/cancel`` and a close end one.

Their answers are tool results shaped as the SDK API's bodies (``structuredContent``); a refusal is
a tool error (``isError``) with the contract's error body, malformed arguments a JSON-RPC -32602.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import mcp_types as types
import msgspec
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS
from psycopg.rows import DictRow

from service.db import operations as operations_db
from service.domain.errors import Refusal, not_found
from service.domain.operations import State
from service.domain.timefmt import rfc3339
from service.mcp.binding import bound_conversation
from service.use_cases import instance_state, lifecycle
from service.use_cases.capabilities import Capability
from service.use_cases.operation_status import get_operation
from service.use_cases.runtime import Runtime
from service.use_cases.sdk_context import operation_view

#: The app whose View these tools serve (service/apps/pomodoro/).
POMODORO_SCOPE = "pomodoro"

READ = "pomodoro.app.read"
CLOSE = "pomodoro.app.close"
SNAPSHOT = "pomodoro.app.snapshot"
SAVE_SNAPSHOT = "pomodoro.app.save_snapshot"

_OPERATION = {
    "operation_id": {
        "type": "string",
        "format": "uuid",
        "description": "The operation of the pomodoro.start call this View belongs to (its result's "
        "operation.operation_id, also its task id).",
    }
}
_SNAPSHOT_WRITE = {
    "expected_revision": {"type": "integer", "minimum": 0, "description": "The revision the write expects."},
    "data": {"type": "object", "description": "The snapshot, in the Pomodoro's state_schema version 1."},
}


def _schema(properties: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": sorted(properties),
        "properties": dict(properties),
    }


_DESCRIPTIONS: dict[str, tuple[str, Mapping[str, Any], bool]] = {
    READ: (
        "The Pomodoro View's operation, its instance's status and the server clock (server_time), "
        "as the SDK's context. Settles the period first if its deadline has passed.",
        _OPERATION,
        True,
    ),
    CLOSE: (
        "Close the Pomodoro View's instance: a focusing period ends cancelled (app_closed); a final "
        "one is never rewritten.",
        _OPERATION,
        False,
    ),
    SNAPSHOT: ("The View's instance snapshot (app.instance-state.v1).", _OPERATION, True),
    SAVE_SNAPSHOT: (
        "Compare-and-set the View's instance snapshot (app.instance-state.v1: state_schema version 1, "
        "at most 4096 bytes, read-only once the instance closed).",
        {**_OPERATION, **_SNAPSHOT_WRITE},
        False,
    ),
}
NAMES = frozenset(_DESCRIPTIONS)


def app_tools() -> list[types.Tool]:
    """The app-only tools of ``tools/list``: a host shows them to the View, never to the model."""
    return [
        types.Tool(
            name=name,
            description=description,
            input_schema=_schema(properties),
            annotations=types.ToolAnnotations(read_only_hint=read_only, destructive_hint=False),
            # No resourceUri: these are the View's tools, not Apps of their own.
            meta={"ui": {"visibility": ["app"]}},
        )
        for name, (description, properties, read_only) in sorted(_DESCRIPTIONS.items())
    ]


def _invalid(message: str, field: str) -> MCPError:
    return MCPError(INVALID_PARAMS, message, data={"field": f"arguments.{field}"})


def _arguments(name: str, arguments: Mapping[str, Any] | None) -> tuple[uuid.UUID, dict[str, Any]]:
    arguments = dict(arguments or {})
    allowed = set(_DESCRIPTIONS[name][1])
    unknown = sorted(set(arguments) - allowed)
    if unknown:
        raise _invalid(f"{name} takes only {sorted(allowed)}, not {unknown}", unknown[0])
    raw = arguments.pop("operation_id", None)
    try:
        operation_id = uuid.UUID(raw) if isinstance(raw, str) else None
    except ValueError:
        operation_id = None
    if operation_id is None:
        raise _invalid(f"{name} needs operation_id, a UUID", "operation_id")
    if name == SAVE_SNAPSHOT:
        revision, data = arguments.get("expected_revision"), arguments.get("data")
        if type(revision) is not int or revision < 0:
            raise _invalid("expected_revision must be an integer >= 0", "expected_revision")
        if not isinstance(data, dict):
            raise _invalid("data must be an object", "data")
    return operation_id, arguments


def _bound(row: DictRow | None, conversation_id: str | None) -> DictRow:
    """The operation, if it is a Pomodoro's the caller reaches; otherwise it is unknown."""
    if (
        row is None
        or row["app_scope"] != POMODORO_SCOPE
        or (conversation_id is not None and row["conversation_id"] != conversation_id)
    ):
        raise not_found("operation")
    return row


def _capability(row: DictRow) -> Capability:
    return Capability(row["instance_id"], row["app_scope"], row["conversation_id"])


async def _operation(rt: Runtime, operation_id: uuid.UUID, conversation_id: str | None) -> DictRow:
    async with rt.unit_of_work(transaction=False) as work:
        return _bound(
            await operations_db.get_by_id(work.conn, operation_id, conversation_id), conversation_id
        )


def _context(row: DictRow) -> dict[str, Any]:
    """The SDK context of the operation's instance, at the clock the row was read at. A Pomodoro's
    instance is open exactly while its operation is focusing: the transaction that ends the period
    closes the instance (the deadline, an interrupt, a leave), and the close cancels a focusing
    period in the same transaction."""
    return {
        "app_scope": row["app_scope"],
        "instance_id": str(row["instance_id"]),
        "conversation_id": row["conversation_id"],
        "status": "open" if row["state"] == State.FOCUSING else "closed",
        "operation": operation_view(row),
        "server_time": rfc3339(row["server_now"]),
    }


async def _read_with_clock(rt: Runtime, operation_id: uuid.UUID, conversation_id: str | None) -> DictRow:
    async with rt.unit_of_work(transaction=False) as work:
        return _bound(
            await operations_db.get_by_id_with_clock(work.conn, operation_id, conversation_id),
            conversation_id,
        )


async def read(rt: Runtime, operation_id: uuid.UUID, conversation_id: str | None) -> dict[str, Any]:
    """The SDK context of the View's own operation (never the instance's or conversation's
    latest): a View re-rendered from an old result shows that period's final state. One statement
    (the row and the clock), unless its deadline has passed: then the operation read settles it
    first, as every read does, and the row is read again."""
    row = await _read_with_clock(rt, operation_id, conversation_id)
    if row["state"] == State.FOCUSING and row["overdue"]:
        await get_operation(rt, operation_id)
        row = await _read_with_clock(rt, operation_id, conversation_id)
    return _context(row)


async def close(rt: Runtime, operation_id: uuid.UUID, conversation_id: str | None) -> dict[str, Any]:
    row = await _operation(rt, operation_id, conversation_id)
    return await lifecycle.close_instance(rt, row["instance_id"])


async def snapshot(rt: Runtime, operation_id: uuid.UUID, conversation_id: str | None) -> dict[str, Any]:
    row = await _operation(rt, operation_id, conversation_id)
    return await instance_state.get_state(rt, _capability(row))


def _saver(
    arguments: dict[str, Any],
) -> Callable[[Runtime, uuid.UUID, str | None], Awaitable[dict[str, Any]]]:
    async def save(rt: Runtime, operation_id: uuid.UUID, conversation_id: str | None) -> dict[str, Any]:
        row = await _operation(rt, operation_id, conversation_id)
        return await instance_state.put_state(
            rt, _capability(row), arguments["expected_revision"], arguments["data"]
        )

    return save


def _result(body: Mapping[str, Any], *, error: bool) -> dict[str, Any]:
    text = msgspec.json.encode(body).decode()
    return {"content": [{"type": "text", "text": text}], "structuredContent": body, "isError": error}


async def call(rt: Runtime, name: str, arguments: Mapping[str, Any] | None, meta: Any) -> dict[str, Any]:
    """One app-only tool call; its ``CallToolResult`` (without ``resultType``)."""
    operation_id, rest = _arguments(name, arguments)
    conversation_id = bound_conversation(meta if isinstance(meta, Mapping) else None)
    run = {READ: read, CLOSE: close, SNAPSHOT: snapshot, SAVE_SNAPSHOT: _saver(rest)}[name]
    try:
        body = await run(rt, operation_id, conversation_id)
    except Refusal as refusal:
        return _result(refusal.body(), error=True)
    return _result(body, error=False)

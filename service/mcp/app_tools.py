"""The MCP App's own tools (``_meta.ui.visibility: ["app"]``): what the Pomodoro View needs.

An MCP Apps host forwards the View's ``tools/call`` to this server with the host's credentials (the
Agent's token, or a person's), so these calls are untrusted UI, like the Web Host's SDK requests:

* Each is bound by the server, never by anything the View names: the ``pomodoro.start`` result the
  host gave the View carries a View token (``service.mcp.view_tokens``: an HMAC over that call's
  conversation and operation), and each call hands it back (``view_token``). The server reads the
  operation the token names, checks the MAC against the row's own conversation, and takes the
  instance from the row; the View names no operation, instance, conversation or capability. A
  token that does not verify, another app's operation, and (with a person's token, or an Agent's
  request that names a conversation in ``_meta``) another conversation's are all an unknown
  operation.
* They run on the use cases the Web Host's SDK API runs on (``service.use_cases``): reading the
  operation (which settles it when its deadline has passed, as every read does), the instance
  snapshot (``app.instance-state.v1``: its schema, 4 KiB, revision check, read-only after close)
  and the lifecycle close (``cancelled(app_closed)``). None of them can complete or interrupt a
  period: only the deadline, ``pomodoro.interrupt`` / ``tasks/cancel`` and a close end one.

Their answers are tool results shaped as the SDK API's bodies (``structuredContent``, with one
sentence as ``content``); a refusal is a tool error (``isError``) with the contract's error body,
malformed arguments a JSON-RPC -32602.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS
from psycopg.rows import DictRow

from service.db import operations as operations_db
from service.domain.errors import Refusal, Unavailable, not_found
from service.domain.operations import State
from service.domain.timefmt import rfc3339
from service.mcp.binding import TOOL_NAME, bound_conversation
from service.mcp.view_tokens import VIEW_TOKEN, ViewTokens
from service.tool_names import listed_name
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
    "view_token": {
        "type": "string",
        "maxLength": 200,
        "description": f"The View token of the pomodoro.start call this View belongs to: its result's "
        f"_meta[{VIEW_TOKEN!r}], as the host gave it. It binds the call to that operation.",
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
            # Provider-safe, as every listed name (service.tool_names): pomodoro_app_read.
            name=listed_name(name),
            title=name,
            description=description,
            input_schema=_schema(properties),
            annotations=types.ToolAnnotations(read_only_hint=read_only, destructive_hint=False),
            # No resourceUri: these are the View's tools, not Apps of their own.
            meta={"ui": {"visibility": ["app"]}, TOOL_NAME: name},
        )
        for name, (description, properties, read_only) in sorted(_DESCRIPTIONS.items())
    ]


def _invalid(message: str, field: str) -> MCPError:
    return MCPError(INVALID_PARAMS, message, data={"field": f"arguments.{field}"})


def _arguments(name: str, arguments: Mapping[str, Any] | None) -> tuple[str, uuid.UUID, dict[str, Any]]:
    arguments = dict(arguments or {})
    allowed = set(_DESCRIPTIONS[name][1])
    unknown = sorted(set(arguments) - allowed)
    if unknown:
        raise _invalid(f"{name} takes only {sorted(allowed)}, not {unknown}", unknown[0])
    token = arguments.pop("view_token", None)
    operation_id = ViewTokens.operation_of(token) if isinstance(token, str) else None
    if token is None or operation_id is None:
        raise _invalid(
            f"{name} needs view_token: the _meta[{VIEW_TOKEN!r}] of the pomodoro.start result", "view_token"
        )
    if name == SAVE_SNAPSHOT:
        revision, data = arguments.get("expected_revision"), arguments.get("data")
        if type(revision) is not int or revision < 0:
            raise _invalid("expected_revision must be an integer >= 0", "expected_revision")
        if not isinstance(data, dict):
            raise _invalid("data must be an object", "data")
    return token, operation_id, arguments


@dataclass(frozen=True, slots=True)
class Bound:
    """What binds one app-only call: the operation its View token names, the token (checked against
    the row before anything is done), and the conversation the credentials confine it to, if any."""

    operation_id: uuid.UUID
    token: str
    tokens: ViewTokens
    conversation_id: str | None

    def check(self, row: DictRow | None) -> DictRow:
        """The operation, if the token opens it and it is a Pomodoro's the caller reaches;
        otherwise it is unknown."""
        if (
            row is None
            or row["app_scope"] != POMODORO_SCOPE
            or (self.conversation_id is not None and row["conversation_id"] != self.conversation_id)
            or not self.tokens.verifies(self.token, row["conversation_id"])
        ):
            raise not_found("operation")
        return row


def _capability(row: DictRow) -> Capability:
    return Capability(row["instance_id"], row["app_scope"], row["conversation_id"])


async def _operation(rt: Runtime, bound: Bound) -> DictRow:
    async with rt.unit_of_work(transaction=False) as work:
        # With the conversation, when the request names one, the read goes to its shard on Citus.
        return bound.check(
            await operations_db.get_by_id(work.conn, bound.operation_id, bound.conversation_id)
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


async def _read_with_clock(rt: Runtime, bound: Bound) -> DictRow:
    async with rt.unit_of_work(transaction=False) as work:
        row = await operations_db.get_by_id_with_clock(work.conn, bound.operation_id, bound.conversation_id)
        return bound.check(row)


async def read(rt: Runtime, bound: Bound) -> dict[str, Any]:
    """The SDK context of the View's own operation (never the instance's or conversation's
    latest): a View re-rendered from an old result shows that period's final state. One statement
    (the row and the clock), unless its deadline has passed: then the operation read settles it
    first, as every read does, and the row is read again."""
    row = await _read_with_clock(rt, bound)
    if row["state"] == State.FOCUSING and row["overdue"]:
        await get_operation(rt, bound.operation_id)
        row = await _read_with_clock(rt, bound)
    return _context(row)


async def close(rt: Runtime, bound: Bound) -> dict[str, Any]:
    row = await _operation(rt, bound)
    return await lifecycle.close_instance(rt, row["instance_id"])


async def snapshot(rt: Runtime, bound: Bound) -> dict[str, Any]:
    row = await _operation(rt, bound)
    return await instance_state.get_state(rt, _capability(row))


def _saver(arguments: dict[str, Any]) -> Callable[[Runtime, Bound], Awaitable[dict[str, Any]]]:
    async def save(rt: Runtime, bound: Bound) -> dict[str, Any]:
        row = await _operation(rt, bound)
        return await instance_state.put_state(
            rt, _capability(row), arguments["expected_revision"], arguments["data"]
        )

    return save


def _sentence(name: str, body: Mapping[str, Any], *, error: bool) -> str:
    """The answer in one sentence for a person (a host's log, an inspector)."""
    if error:
        return f"{name} was refused ({body.get('error')}): {body.get('message')}"
    operation = body.get("operation")
    if isinstance(operation, Mapping):
        if operation["state"] == State.FOCUSING:
            return f"The focus period is focusing until {operation.get('ends_at')}."
        return f"The focus period ended {operation['state']} ({operation['reason']})."
    if "revision" in body:
        return (
            f"The snapshot is at revision {body['revision']}{' (read-only)' if body.get('readonly') else ''}."
        )
    return f"{name} answered."


def _result(name: str, body: Mapping[str, Any], *, error: bool) -> dict[str, Any]:
    """A ``CallToolResult``: the body as ``structuredContent``, and one sentence as its text — not the
    JSON again, as the spec advises for clients without structured content: these tools are only
    ever called by a View, which reads the structure, and the copy (escaped inside the JSON-RPC
    answer) was a third of what the read cost beyond ``tasks/get``."""
    text = _sentence(name, body, error=error)
    return {"content": [{"type": "text", "text": text}], "structuredContent": body, "isError": error}


#: What the tools answer when the deployment has no key to mint View tokens with.
DISABLED = Unavailable(
    "MCP Apps need a key for the View's token: set MCP_APP_SECRET (or HOST_SESSION_SECRET)",
    code="mcp_apps_disabled",
)


async def call(
    rt: Runtime, tokens: ViewTokens, name: str, arguments: Mapping[str, Any] | None, meta: Any
) -> dict[str, Any]:
    """One app-only tool call; its ``CallToolResult`` (without ``resultType``)."""
    token, operation_id, rest = _arguments(name, arguments)
    if not tokens.enabled:
        return _result(name, DISABLED.body(), error=True)
    bound = Bound(
        operation_id, token, tokens, bound_conversation(meta if isinstance(meta, Mapping) else None)
    )
    run = {READ: read, CLOSE: close, SNAPSHOT: snapshot, SAVE_SNAPSHOT: _saver(rest)}[name]
    try:
        body = await run(rt, bound)
    except Refusal as refusal:
        return _result(name, refusal.body(), error=True)
    return _result(name, body, error=False)

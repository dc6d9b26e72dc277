"""An MCP App's own tools (``_meta.ui.visibility: ["app"]``): what a View needs.

Every app that declares an MCP App (``service.mcp.app_resource``) gets four, named after its scope
(``<app>.app.read``, ``.close``, ``.snapshot``, ``.save_snapshot``), bound to the operation of the
call its View renders beside (its manifest's ``surface.mcp_app.tool``).

An MCP Apps host forwards the View's ``tools/call`` to this server with the host's credentials (the
Agent's token, or a person's), so these calls are untrusted UI, like the Web Host's SDK requests:

* Each is bound by the server, never by anything the View names: the result of the call the View
  renders beside, as the host gave it to the View, carries a View token
  (``service.mcp.view_tokens``: an HMAC over that call's conversation and operation), and each
  call hands it back (``view_token``). The server reads the operation the token names, checks the
  MAC against the row's own conversation, and takes the instance from the row; the View names no
  operation, instance, conversation or capability. A token that does not verify, another app's
  operation (the token does not name the app: the row does), and (with a person's token, or an
  Agent's request that names a conversation in ``_meta``) another conversation's are all an
  unknown operation.
* They run on the use cases the Web Host's SDK API runs on (``service.use_cases``): reading the
  operation (which settles it when its deadline has passed, as every read does), the instance
  snapshot (``app.instance-state.v1``: its schema, 4 KiB, revision check, read-only after close)
  and the lifecycle close (``cancelled(app_closed)``). None of them can complete or interrupt an
  operation: only the deadline, the app's own Tools / ``tasks/cancel`` and a close end one. None
  reads the database itself: each is a use case (``service.use_cases.views``).

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

from service.app_manifest import AppManifest
from service.domain.errors import Refusal, Unavailable, not_found
from service.domain.operations import State
from service.domain.timefmt import rfc3339
from service.manifests import Registry
from service.mcp.app_resource import apps_with_views
from service.mcp.binding import TOOL_NAME, bound_conversation
from service.mcp.view_tokens import VIEW_TOKEN, ViewTokens
from service.tool_names import listed_name
from service.use_cases import instance_state, lifecycle, views
from service.use_cases.capabilities import Capability
from service.use_cases.operation_status import get_operation
from service.use_cases.runtime import Runtime
from service.use_cases.sdk_context import operation_view

# What each of an app's View tools does, by the end of its name (``<app>.app.<what>``).
READ = "read"
CLOSE = "close"
SNAPSHOT = "snapshot"
SAVE_SNAPSHOT = "save_snapshot"


def _operation_argument(app: AppManifest) -> dict[str, Any]:
    assert app.mcp_app is not None
    return {
        "view_token": {
            "type": "string",
            "maxLength": 200,
            "description": f"The View token of the {app.mcp_app.tool} call this View belongs to: its "
            f"result's _meta[{VIEW_TOKEN!r}], as the host gave it. It binds the call to that operation.",
        }
    }


def _snapshot_write(app: AppManifest) -> dict[str, Any]:
    version = app.instance_state.state_schema_version if app.instance_state is not None else 1
    return {
        "expected_revision": {
            "type": "integer",
            "minimum": 0,
            "description": "The revision the write expects.",
        },
        "data": {
            "type": "object",
            "description": f"The snapshot, in the {app.name}'s state_schema version {version}.",
        },
    }


def _schema(properties: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": sorted(properties),
        "properties": dict(properties),
    }


def _descriptions(app: AppManifest) -> dict[str, tuple[str, Mapping[str, Any], bool]]:
    """Each of the app's View tools: its description, its arguments, whether it only reads."""
    assert app.mcp_app is not None
    operation, own = _operation_argument(app), app.mcp_app.tool_descriptions
    version = app.instance_state.state_schema_version if app.instance_state is not None else 1
    return {
        READ: (
            own.get(READ)
            or f"The {app.name} View's operation, its instance's status and the server clock "
            "(server_time), as the SDK's context. Settles the operation first if its deadline has passed.",
            operation,
            True,
        ),
        CLOSE: (
            own.get(CLOSE)
            or f"Close the {app.name} View's instance: a focusing operation ends cancelled (app_closed); "
            "a final one is never rewritten.",
            operation,
            False,
        ),
        SNAPSHOT: ("The View's instance snapshot (app.instance-state.v1).", operation, True),
        SAVE_SNAPSHOT: (
            "Compare-and-set the View's instance snapshot (app.instance-state.v1: state_schema version "
            f"{version}, at most 4096 bytes, read-only once the instance closed).",
            {**operation, **_snapshot_write(app)},
            False,
        ),
    }


@dataclass(frozen=True, slots=True)
class ViewTool:
    """One app-only tool: the app whose View calls it, and what it does."""

    app: AppManifest
    what: str


def view_tools(registry: Registry) -> dict[str, ViewTool]:
    """The app-only tools of the registry's apps that declare an MCP App, by name."""
    return {
        f"{app.app_scope}.app.{what}": ViewTool(app, what)
        for app in apps_with_views(registry)
        for what in _descriptions(app)
    }


def app_tools(registry: Registry) -> list[types.Tool]:
    """The app-only tools of ``tools/list``: a host shows them to the View, never to the model."""
    tools = view_tools(registry)
    listed = []
    for name in sorted(tools):
        description, properties, read_only = _descriptions(tools[name].app)[tools[name].what]
        listed.append(
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
        )
    return listed


def _invalid(message: str, field: str) -> MCPError:
    return MCPError(INVALID_PARAMS, message, data={"field": f"arguments.{field}"})


def _arguments(
    name: str, tool: ViewTool, arguments: Mapping[str, Any] | None
) -> tuple[str, uuid.UUID, dict[str, Any]]:
    arguments = dict(arguments or {})
    allowed = set(_descriptions(tool.app)[tool.what][1])
    unknown = sorted(set(arguments) - allowed)
    if unknown:
        raise _invalid(f"{name} takes only {sorted(allowed)}, not {unknown}", unknown[0])
    token = arguments.pop("view_token", None)
    operation_id = ViewTokens.operation_of(token) if isinstance(token, str) else None
    if token is None or operation_id is None:
        raise _invalid(
            f"{name} needs view_token: the _meta[{VIEW_TOKEN!r}] of the {_viewed(tool)} result", "view_token"
        )
    if tool.what == SAVE_SNAPSHOT:
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
    app_scope: str  # the app whose View calls: only its operations are reached

    def check(self, row: DictRow | None) -> DictRow:
        """The operation, if the token opens it and it is one of the View's app the caller
        reaches; otherwise it is unknown."""
        if (
            row is None
            or row["app_scope"] != self.app_scope
            or (self.conversation_id is not None and row["conversation_id"] != self.conversation_id)
            or not self.tokens.verifies(self.token, row["conversation_id"])
        ):
            raise not_found("operation")
        return row


def _capability(row: DictRow) -> Capability:
    return Capability(row["instance_id"], row["app_scope"], row["conversation_id"])


def _viewed(tool: ViewTool) -> str:
    assert tool.app.mcp_app is not None
    return tool.app.mcp_app.tool


async def _operation(rt: Runtime, bound: Bound) -> DictRow:
    # With the conversation, when the request names one, the read goes to its shard on Citus.
    return bound.check(await views.view_operation(rt, bound.operation_id, bound.conversation_id))


def _context(row: DictRow) -> dict[str, Any]:
    """The SDK context of the operation's instance, at the clock the row was read at. An instance a
    Tool opened with its operation is open exactly while that operation is focusing: the transaction
    that ends the operation closes the instance (the deadline, an interrupt, a leave), and the close
    cancels a focusing operation in the same transaction."""
    return {
        "app_scope": row["app_scope"],
        "instance_id": str(row["instance_id"]),
        "conversation_id": row["conversation_id"],
        "status": "open" if row["state"] == State.FOCUSING else "closed",
        "operation": operation_view(row),
        "server_time": rfc3339(row["server_now"]),
    }


async def _read_with_clock(rt: Runtime, bound: Bound) -> DictRow:
    return bound.check(await views.view_operation_with_clock(rt, bound.operation_id, bound.conversation_id))


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


def _sentence(name: str, noun: str, body: Mapping[str, Any], *, error: bool) -> str:
    """The answer in one sentence for a person (a host's log, an inspector); ``noun`` is what the
    app calls its operation (its manifest's ``surface.mcp_app.operation``)."""
    if error:
        return f"{name} was refused ({body.get('error')}): {body.get('message')}"
    operation = body.get("operation")
    if isinstance(operation, Mapping):
        if operation["state"] == State.FOCUSING:
            return f"The {noun} is focusing until {operation.get('ends_at')}."
        return f"The {noun} ended {operation['state']} ({operation['reason']})."
    if "revision" in body:
        return (
            f"The snapshot is at revision {body['revision']}{' (read-only)' if body.get('readonly') else ''}."
        )
    return f"{name} answered."


def _result(name: str, noun: str, body: Mapping[str, Any], *, error: bool) -> dict[str, Any]:
    """A ``CallToolResult``: the body as ``structuredContent``, and one sentence as its text — not the
    JSON again, as the spec advises for clients without structured content: these tools are only
    ever called by a View, which reads the structure, and the copy (escaped inside the JSON-RPC
    answer) was a third of what the read cost beyond ``tasks/get``."""
    text = _sentence(name, noun, body, error=error)
    return {"content": [{"type": "text", "text": text}], "structuredContent": body, "isError": error}


#: What the tools answer when the deployment has no key to mint View tokens with.
DISABLED = Unavailable(
    "MCP Apps need a key for the View's token: set MCP_APP_SECRET (or HOST_SESSION_SECRET)",
    code="mcp_apps_disabled",
)


async def call(
    rt: Runtime, tokens: ViewTokens, name: str, arguments: Mapping[str, Any] | None, meta: Any
) -> dict[str, Any]:
    """One app-only tool call (``name`` one of ``view_tools(rt.registry)``); its ``CallToolResult``
    (without ``resultType``)."""
    tool = view_tools(rt.registry)[name]
    assert tool.app.mcp_app is not None
    noun = tool.app.mcp_app.operation
    token, operation_id, rest = _arguments(name, tool, arguments)
    if not tokens.enabled:
        return _result(name, noun, DISABLED.body(), error=True)
    bound = Bound(
        operation_id,
        token,
        tokens,
        bound_conversation(meta if isinstance(meta, Mapping) else None),
        tool.app.app_scope,
    )
    run = {READ: read, CLOSE: close, SNAPSHOT: snapshot, SAVE_SNAPSHOT: _saver(rest)}[tool.what]
    try:
        body = await run(rt, bound)
    except Refusal as refusal:
        return _result(name, noun, refusal.body(), error=True)
    return _result(name, noun, body, error=False)

"""The MCP server: the SDK's low-level ``Server`` with the runtime's handlers.

``tools/list`` and ``tools/call`` answer at every protocol revision the SDK serves. Tasks have
two wires, told apart by the request's revision: on handshake-era sessions the 2025-11-25 one
(``tasks/get``, ``tasks/result``, ``tasks/cancel``, task-augmented ``tools/call``;
``service.mcp.tasks``), at 2026-07-28 the extension ``io.modelcontextprotocol/tasks``
(``tasks/get``, ``tasks/cancel``, ``tasks/update``, a ``CreateTaskResult`` from ``tools/call``;
``service.mcp.tasks_extension``). The SDK ships neither runtime.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping
from typing import Any

import mcp_types as types
import structlog
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import X_MCP_HEADER_KEY
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND, SERVER_INFO_META_KEY
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from psycopg import InternalError, OperationalError

from service.db import citus
from service.db.reconnect import session_ended
from service.domain.errors import Refusal
from service.http import status_of
from service.mcp import (
    app_resource,
    app_tools,
    elicitation,
    input_required,
    progress,
    status,
    tasks_extension,
)
from service.mcp.binding import bind, person_conversation
from service.mcp.listen import TaskListen
from service.mcp.push import Pushes
from service.mcp.tasks import cancel_task, read_task, settled, task_result, task_view
from service.mcp.tools import Answer, call_result, list_tools, run_tool, runs_as_task
from service.mcp.tracing import sdk_tracing
from service.mcp.view_tokens import VIEW_TOKEN, ViewTokens
from service.projection_hub import ProjectionHub
from service.tool_names import listed_name, listed_names
from service.use_cases.runtime import Runtime
from service.version import __version__

log = structlog.get_logger("service.mcp")

Ctx = ServerRequestContext[Any, Any]

#: MCP Apps (``io.modelcontextprotocol/ui``): the Views the apps declare (``service.mcp.app_resource``).
UI_EXTENSION: dict[str, dict[str, Any]] = {
    app_resource.EXTENSION_ID: {"mimeTypes": [app_resource.APP_MIME_TYPE]}
}


def declares_headers(schema: Mapping[str, Any]) -> bool:
    """Whether an input schema annotates any property for an ``Mcp-Param-*`` header
    (``x-mcp-header``): only such a tool's headers have anything to be checked against."""
    return X_MCP_HEADER_KEY in json.dumps(schema)


TASKS_CAPABILITY = types.ServerTasksCapability(
    cancel=types.TasksCancelCapability(),
    requests=types.ServerTasksRequestsCapability(
        tools=types.TasksToolsCapability(call=types.TasksCallCapability())
    ),
)


@contextlib.contextmanager
def translated() -> Iterator[None]:
    """Runtime failures as JSON-RPC errors: never a stack trace or driver text on the wire."""
    try:
        yield
    except OperationalError:
        log.warning("mcp_database_unavailable")
        raise MCPError(INTERNAL_ERROR, "the database is unavailable; nothing was applied, retry") from None
    except InternalError as error:
        # A Citus node restarting, or the server ending a transaction left idle: as unavailable.
        if not (citus.node_failed(error) or session_ended(error)):
            raise
        log.warning("mcp_database_unavailable", error=str(error).strip())
        raise MCPError(INTERNAL_ERROR, "the database is unavailable; nothing was applied, retry") from None
    except Refusal as refusal:
        raise MCPError(
            INVALID_PARAMS if status_of(refusal) < 500 else INTERNAL_ERROR, refusal.message
        ) from None


def _modern(ctx: Ctx) -> bool:
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


def renders_apps(ctx: Ctx) -> bool:
    """Whether the client declares MCP Apps (``io.modelcontextprotocol/ui``) on this session or request."""
    capabilities = ctx.session.client_capabilities
    return capabilities is not None and app_resource.EXTENSION_ID in (capabilities.extensions or {})


def _not_found(ctx: Ctx) -> MCPError:
    return MCPError(METHOD_NOT_FOUND, "Method not found", data=ctx.method)


#: A person's client that could never bring the answer back is told so, and nothing is asked.
UNANSWERABLE = (
    "{tool} asks the person a question, and this client could never bring the answer back: it "
    "needs elicitation (2025-11-25), and at 2026-07-28 also the tasks extension "
    "(io.modelcontextprotocol/tasks) for input_required; nothing was asked"
)


class RuntimeMcpServer(Server[Any]):
    """Advertises the task capability on handshake-era sessions and the tasks extension at
    2026-07-28: each where it serves it."""

    def __init__(self, rt: Runtime, hub: ProjectionHub) -> None:
        # The tools whose schema declares Mcp-Param headers (SEP-2243: a manifest's x-mcp-header,
        # checked at load); the SDK holds a 2026-07-28 call's headers to its arguments (400,
        # -32020). For any other tool (every shipped one) it could find nothing to compare, so it is
        # not given the schema to walk.
        # The Views' own tools, of the apps that declare an MCP App (service.mcp.app_tools), by
        # their own (dotted) names: a call by the listed name is renamed first (_own_name).
        self.app_tools = app_tools.app_tools(rt.registry)
        self.app_tool_names = frozenset(str(tool.title) for tool in self.app_tools)
        self.tool_views = app_resource.tool_views(rt.registry)
        app_schemas = {str(tool.title): tool.input_schema for tool in self.app_tools}
        schemas = {name: spec.input_schema for name, spec in rt.registry.tools.items()} | app_schemas
        # Every tool is listed under its provider-safe name (service.tool_names) and called by it
        # or by its own (dotted) name; refused here, at start, if two would be listed alike.
        self._named = {
            listed: name for listed, name in listed_names([*schemas, status.NAME]).items() if listed != name
        }
        self._header_schemas = {
            called: schema
            for name, schema in schemas.items()
            if declares_headers(schema)
            for called in (name, listed_name(name))
        }
        super().__init__(
            "lineup-runtime",
            version=__version__,
            instructions=(
                "Bind every tools/call to a conversation with params._meta['io.lineup/conversation_id'] "
                "and give it an idempotency key in params._meta['io.lineup/tool_call_id']."
            ),
            on_list_tools=self._list_tools,
            # At 2026-07-28 the SDK checks Mcp-Param headers against the tool's input schema; without
            # this it would run the whole tools/list handler for every call.
            get_tool_input_schema=self._header_schemas.get,
            on_call_tool=self._call_tool,
            on_list_resources=self._list_resources,
            on_read_resource=self._read_resource,
        )
        self.rt = rt
        self.view_tokens = ViewTokens.from_settings(rt.settings)
        self.pushes = Pushes(rt, hub)
        self._hub = hub
        self.add_request_handler("tasks/get", types.GetTaskRequestParams, self._get_task)
        self.add_request_handler("tasks/result", types.GetTaskPayloadRequestParams, self._task_result)
        self.add_request_handler("tasks/cancel", types.CancelTaskRequestParams, self._cancel_task)
        self.add_request_handler("tasks/update", tasks_extension.UpdateTaskRequestParams, self._update_task)
        # At 2026-07-28 only (the SDK's method table has no subscriptions/listen before it).
        self.add_request_handler(
            "subscriptions/listen", types.SubscriptionsListenRequestParams, TaskListen(rt, hub)
        )
        self.extensions = {tasks_extension.EXTENSION: {}, **UI_EXTENSION}
        # SEP-2322's ephemeral input rounds (service.mcp.input_required): their requestState is
        # sealed and opened by the middleware below (after _own_name: one tool name either way).
        self.input_rounds = input_required.InputRounds(rt.settings, rt.registry)
        # Task-augmented tools/call answers a CreateTaskResult, which the SDK's tools/call result
        # check does not know: a middleware (above that check) answers it. The SDK's OpenTelemetry
        # middleware is kept only when this process traces (service.mcp.tracing): otherwise it
        # costs CPU on every call for spans nobody records.
        self.tracing = sdk_tracing(self.middleware)
        self.middleware = [
            *self.tracing,
            self._initialize_extensions,
            self._own_name,
            self.input_rounds.seal,
            self._app_tool_call,
            self._task_augmented_call,
        ]

    def get_capabilities(self, *args: Any, **kwargs: Any) -> types.ServerCapabilities:
        capabilities = super().get_capabilities(*args, **kwargs)
        if kwargs.get("protocol_version") in MODERN_PROTOCOL_VERSIONS:
            # subscriptions/listen is served for task pushes only: the tool list never changes.
            return capabilities.model_copy(update={"tools": types.ToolsCapability(list_changed=False)})
        # The tasks extension is a 2026-07-28 one; MCP Apps (SEP-2133 extensions) is at both.
        return capabilities.model_copy(update={"tasks": TASKS_CAPABILITY, "extensions": UI_EXTENSION})

    async def _list_tools(
        self, ctx: Ctx, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        listed = list_tools(self.rt.registry)
        # The apps' tools, then how a long call ended for a client without tasks (service.mcp.status).
        tools = [*listed.tools, status.TOOL]
        if renders_apps(ctx):
            # Only a client that renders MCP Apps lists the View's tools (and keeps them from its model).
            tools += self.app_tools
        return listed.model_copy(update={"tools": tools})

    async def _list_resources(
        self, ctx: Ctx, params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return app_resource.list_resources(self.rt.registry)

    async def _read_resource(
        self, ctx: Ctx, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        return app_resource.read_resource(self.rt.registry, params.uri)

    async def _run(
        self,
        ctx: Ctx,
        params: Mapping[str, Any],
        *,
        as_task: bool = False,
        given: dict[str, Any] | None = None,
    ) -> Answer:
        binding = bind(params.get("_meta"))
        name, arguments = params.get("name"), params.get("arguments")
        if not isinstance(name, str) or not (arguments is None or isinstance(arguments, dict)):
            raise MCPError(INVALID_PARAMS, "tools/call needs a tool name and an arguments object")
        with translated():
            answer = await run_tool(self.rt, name, arguments, binding, given)
        if answer.operation_id is not None and as_task:
            operation = {**answer.body["operation"], "conversation_id": binding.conversation_id}
            self.pushes.watch(ctx.session, operation, fresh=not answer.replayed)
        return answer

    async def _call_tool(self, ctx: Ctx, params: types.CallToolRequestParams) -> Any:
        raw = ctx.params or {}
        if raw.get("name") in self.app_tool_names:  # the MCP App's own (visibility ["app"])
            with translated():
                viewed = await app_tools.call(
                    self.rt, self.view_tokens, raw["name"], raw.get("arguments"), raw.get("_meta")
                )
            return {**viewed, "resultType": "complete"}
        if raw.get("name") == status.NAME:  # read-only, bound to the conversation as any call
            arguments = raw.get("arguments")
            if not (arguments is None or isinstance(arguments, dict)):
                raise MCPError(INVALID_PARAMS, "tools/call needs an arguments object")
            binding = bind(raw.get("_meta"))
            with translated():
                return {**await status.call(self.rt, self._hub, binding, arguments), "resultType": "complete"}
        if person_conversation.get() is not None and not self._can_answer(ctx, raw.get("name")):
            raise MCPError(INVALID_PARAMS, UNANSWERABLE.format(tool=raw.get("name")))
        # SEP-2322's ephemeral input rounds (service.mcp.input_required): a tool that declares them
        # asks a 2026-07-28 client first, writing nothing; the call that completes them decides once.
        # At 2025-11-25 the same requests are sent to the client over the session before deciding.
        if _modern(ctx):
            gathered = self.input_rounds.gather(ctx, raw)
        else:  # 2025-11-25: the rounds asked over the session while the call waits
            with translated():
                gathered = await self.input_rounds.ask_over_session(ctx, raw)
        if gathered.asks is not None:
            return gathered.asks
        answer = await self._run(ctx, raw, given=gathered.given)
        result = self._viewed(ctx, answer, call_result(answer))
        if (
            _modern(ctx)
            and runs_as_task(self.rt.registry, raw.get("name"), extension=True)
            and tasks_extension.declares(ctx)
        ):
            with translated():
                created = await tasks_extension.created(self.rt, answer, result["_meta"])
            if created is not None:
                return created
        if (
            not _modern(ctx)
            and answer.opens == "interaction"
            and answer.accepted
            and elicitation.elicits(ctx.session.client_capabilities)
        ):
            # The client asks the person itself; the call waits for the answer (or the Host's).
            with translated():
                answered = await elicitation.ask(self.rt, self._hub, ctx, answer)
            if answered is not None:
                return answered
        if progress.held(answer, self.rt.registry.tools[answer.tool].await_in_call_seconds):
            # A short operation: the call waits for its ending (with progress when asked).
            with translated():
                ending = await progress.await_ending(self.rt, self._hub, ctx, answer, raw)
            return {**self._viewed(ctx, answer, ending), "resultType": "complete"}
        # The SDK checks this against the negotiated revision's CallToolResult (2026-07-28 requires
        # resultType; the 2025 check drops it).
        return {**result, "resultType": "complete"}

    def _can_answer(self, ctx: Ctx, name: object) -> bool:
        """Whether this client can bring the person's answer to a question the tool would ask: it
        takes elicitation, and at 2026-07-28 also the tasks extension (``input_required``). The
        Agent's questions are answered through the Host; a person's MCP client has no Host."""
        runner = self.rt.registry.runners.get(name) if isinstance(name, str) else None
        if runner is None or runner.opens != "interaction":
            return True
        return elicitation.elicits(ctx.session.client_capabilities) and (
            not _modern(ctx) or tasks_extension.declares(ctx)
        )

    async def _initialize_extensions(self, ctx: Ctx, call_next: CallNext) -> HandlerResult:
        """The extensions this server declares (MCP Apps, SEP-2133's ``capabilities.extensions``)
        reach a client at 2025-11-25 too: that revision's wire model has no such member, so the
        SDK's serialization drops it; it is put back into the serialized answer."""
        result = await call_next(ctx)
        if ctx.method == "initialize" and isinstance(result, dict):
            capabilities = result.get("capabilities")
            if isinstance(capabilities, dict) and "extensions" not in capabilities:
                result = {**result, "capabilities": {**capabilities, "extensions": UI_EXTENSION}}
        return result

    async def _own_name(self, ctx: Ctx, call_next: CallNext) -> HandlerResult:
        """A ``tools/call`` by a listed name (``pomodoro_start``) goes on as the call by the tool's
        own name (``pomodoro.start``), which is also still taken: both answer alike."""
        params = ctx.params
        if ctx.method == "tools/call" and isinstance(params, Mapping):
            name = params.get("name")
            own = self._named.get(name) if isinstance(name, str) else None
            if own is not None:
                ctx.params = {**params, "name": own}
        return await call_next(ctx)

    async def _app_tool_call(self, ctx: Ctx, call_next: CallNext) -> HandlerResult:
        """The View's app-only tools (``service.mcp.app_tools``), answered above the SDK's generic
        checks of a ``tools/call``: their arguments get stricter checks of their own, and their
        result is always the same shape (a ``CallToolResult``), so the request's and the result's
        pydantic validation against the revision's models — a third of such a read's CPU — is not
        run. A malformed request is ``-32602`` as there; a task-augmented one goes the usual way."""
        params = ctx.params
        if (
            ctx.method != "tools/call"
            or not isinstance(params, Mapping)
            or params.get("name") not in self.app_tool_names
            or params.get("task") is not None
        ):
            return await call_next(ctx)
        modern = _modern(ctx)
        if not modern and ctx.session.client_params is None:  # the handshake's gate, as the SDK's
            raise MCPError(INVALID_PARAMS, "Invalid request parameters", data="")
        arguments, meta = params.get("arguments"), params.get("_meta")
        if not (arguments is None or isinstance(arguments, dict)) or not (
            meta is None or isinstance(meta, dict)
        ):
            raise MCPError(INVALID_PARAMS, "tools/call needs an arguments object (and _meta an object)")
        with translated():
            viewed = await app_tools.call(self.rt, self.view_tokens, params["name"], arguments, meta)
        if not modern:
            return viewed
        # What the SDK's pipeline adds to a 2026-07-28 result (a short-circuit owns its envelope).
        return {**viewed, "resultType": "complete", "_meta": {SERVER_INFO_META_KEY: self.server_info_stamp}}

    async def _task_augmented_call(self, ctx: Ctx, call_next: CallNext) -> HandlerResult:
        params = ctx.params
        if (
            ctx.method != "tools/call"
            or not isinstance(params, Mapping)
            or params.get("task") is None
            or ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        ):
            return await call_next(ctx)
        if ctx.session.client_params is None:
            raise MCPError(INVALID_PARAMS, "Invalid request parameters", data="")
        types.CallToolRequestParams.model_validate(params, by_name=False)
        if not runs_as_task(self.rt.registry, params.get("name"), extension=False):
            raise MCPError(METHOD_NOT_FOUND, f"{params.get('name')!r} does not run as a task")
        answer = await self._run(ctx, params, as_task=True)
        if answer.operation_id is None:
            # Nothing was opened (a refusal), so there is no task: the answer is the tool's result.
            return self._viewed(ctx, answer, call_result(answer))
        operation = {**answer.body["operation"], "conversation_id": answer.binding.conversation_id}
        if answer.replayed:  # the answer is as it was then: the task is as it is now
            with translated():
                operation = await read_task(self.rt, answer.operation_id)
        return {
            "task": task_view(operation),
            "_meta": self._viewed(ctx, answer, call_result(answer))["_meta"],
        }

    def _viewed(self, ctx: Ctx, answer: Answer, result: dict[str, Any]) -> dict[str, Any]:
        """``result`` with the View's token in its ``_meta`` when a client that renders MCP Apps
        calls a tool that has one and the answer names an operation (the one it opened, or the
        focusing one a refusal names): a token for that operation in the call's own conversation.
        Only the ``_meta`` grows; ``structuredContent`` stays the REST body."""
        if answer.tool not in self.tool_views or not renders_apps(ctx):
            return result
        operation_id = answer.operation_id
        if operation_id is None and answer.body.get("error") == "operation_already_focusing":
            named = answer.body.get("operation_id")
            operation_id = named if isinstance(named, str) else None
        token = (
            None
            if operation_id is None
            else self.view_tokens.mint(answer.binding.conversation_id, operation_id)
        )
        if token is None:
            return result
        return {**result, "_meta": {**result["_meta"], VIEW_TOKEN: token}}

    async def _get_task(self, ctx: Ctx, params: types.GetTaskRequestParams) -> dict[str, Any]:
        with translated():
            if _modern(ctx):
                return await tasks_extension.get(self.rt, ctx, params.task_id)
            return task_view(await read_task(self.rt, params.task_id))

    async def _task_result(self, ctx: Ctx, params: types.GetTaskPayloadRequestParams) -> dict[str, Any]:
        if _modern(ctx):  # the extension has no tasks/result: tasks/get carries the result
            raise _not_found(ctx)
        with translated():
            operation = await settled(self.rt, self._hub, params.task_id)
        result = task_result(operation)
        # The task is an operation: a host that renders its Tool's View with the final result binds it.
        token = self.view_tokens.mint(operation["conversation_id"], operation["operation_id"])
        if token is not None and renders_apps(ctx):
            result["_meta"][VIEW_TOKEN] = token
        return result

    async def _cancel_task(self, ctx: Ctx, params: types.CancelTaskRequestParams) -> dict[str, Any]:
        with translated():
            if _modern(ctx):
                return await tasks_extension.cancel(self.rt, ctx, params.task_id)
            return await cancel_task(self.rt, params.task_id)

    async def _update_task(self, ctx: Ctx, params: tasks_extension.UpdateTaskRequestParams) -> dict[str, Any]:
        if not _modern(ctx):
            raise _not_found(ctx)
        with translated():
            return await tasks_extension.update(self.rt, ctx, params.task_id, params.input_responses)

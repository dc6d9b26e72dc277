"""The Agent Tool API (``Bearer $AGENT_TOKEN``)."""

from __future__ import annotations

from typing import Any, cast

from litestar import Controller, MediaType, Request, Response, get, post
from litestar.params import JSONBody

from service.api import inputs
from service.api.answers import (
    Operation,
    PomodoroInterruptReceipt,
    ToolCallAccepted,
    ToolList,
    answer,
    refusals,
)
from service.api.auth import AGENT_SECURITY, require
from service.api.bodies import ToolCallBody
from service.api.errors import status_of_outcome
from service.api.inputs import UuidPath
from service.api.state import runtime_of
from service.domain.errors import InvalidArguments, UnknownTool
from service.domain.idempotency import fingerprint
from service.metrics import TOOL_CALLS
from service.use_cases.operation_status import get_operation
from service.use_cases.tool_calls import ToolCall, call_tool


class AgentToolController(Controller):
    path = "/v1"
    tags = ["Agent Tool API"]
    security = AGENT_SECURITY
    before_request = require("agent")

    @get("/tools", summary="The Agent Tools of every manifest", responses=refusals())
    async def list_tools(self, request: Request[Any, Any, Any]) -> ToolList:
        return cast(ToolList, {"tools": runtime_of(request).registry.public_tools()})

    @post(
        "/tool-calls",
        status_code=202,
        summary="Call a tool; tool_call_id is the idempotency key",
        description="arguments are checked against the tool's input_schema (GET /v1/tools). The same "
        "tool_call_id with the same body replays the first answer; 400, 401, 404, 413 and 422 record "
        "nothing, so the call may be corrected and retried under the same id.",
        responses={
            202: answer(
                ToolCallAccepted,
                "An operation tool accepted the call; its result comes through the outbox",
            ),
            200: answer(PomodoroInterruptReceipt, "A direct tool's answer (pomodoro.interrupt)"),
            **refusals(
                {
                    404: ("unknown_tool",),
                    409: ("operation_already_focusing", "idempotency_key_reused"),
                    422: ("invalid_arguments",),
                },
                body=True,
            ),
        },
    )
    async def tool_call(
        self, data: JSONBody[ToolCallBody], request: Request[Any, Any, Any]
    ) -> Response[bytes]:
        tool = runtime_of(request).registry.tool(data.tool)
        if tool is None:
            TOOL_CALLS.labels("unknown", "unknown_tool").inc()
            raise UnknownTool(f"no tool named {data.tool!r}")
        details = tool.validate_arguments(data.arguments)
        if details:
            TOOL_CALLS.labels(data.tool, "invalid_arguments").inc()
            raise InvalidArguments(
                f"the arguments do not match the input schema of {data.tool}",
                details=[d.as_dict() for d in details],
            )
        arguments = dict(data.arguments)
        if isinstance(arguments.get("duration_seconds"), float):
            arguments["duration_seconds"] = int(arguments["duration_seconds"])
        call = ToolCall(data.tool_call_id, data.conversation_id, data.tool, arguments)
        # The body as decoded JSON (read once, kept by the request): the idempotency fingerprint.
        answered = await call_tool(runtime_of(request), call, fingerprint(await request.json()))
        return Response(
            answered.body, status_code=status_of_outcome(answered.outcome), media_type=MediaType.JSON
        )

    @get(
        "/operations/{operation_id:str}",
        summary="An operation (settled first when its deadline has passed)",
        responses=refusals({404: ("unknown_operation",)}, path=True),
    )
    async def operation(self, operation_id: UuidPath, request: Request[Any, Any, Any]) -> Operation:
        found = await get_operation(runtime_of(request), inputs.uuid_naming(operation_id, "operation"))
        return cast(Operation, found)

"""The Agent Tool API (``Bearer $AGENT_TOKEN``)."""

from __future__ import annotations

from typing import Any

from litestar import Controller, MediaType, Request, Response, get, post
from litestar.params import FromPath

from service.api import inputs
from service.api.auth import require
from service.api.bodies import ToolCallBody, read
from service.api.state import runtime_of
from service.domain.errors import InvalidArguments, UnknownTool
from service.domain.idempotency import fingerprint
from service.metrics import TOOL_CALLS
from service.use_cases.operation_status import get_operation
from service.use_cases.tool_calls import ToolCall, call_tool

JsonResponse = Response[bytes]


class AgentToolController(Controller):
    path = "/v1"
    before_request = require("agent")

    @get("/tools")
    async def list_tools(self, request: Request[Any, Any, Any]) -> dict[str, Any]:
        return {"tools": runtime_of(request).registry.public_tools()}

    @post("/tool-calls")
    async def tool_call(self, request: Request[Any, Any, Any]) -> JsonResponse:
        body, raw = await read(request, ToolCallBody)
        tool = runtime_of(request).registry.tool(body.tool)
        if tool is None:
            TOOL_CALLS.labels("unknown", "unknown_tool").inc()
            raise UnknownTool(f"no tool named {body.tool!r}")
        details = tool.validate_arguments(body.arguments)
        if details:
            TOOL_CALLS.labels(body.tool, "invalid_arguments").inc()
            raise InvalidArguments(
                f"the arguments do not match the input schema of {body.tool}",
                details=[d.as_dict() for d in details],
            )
        arguments = dict(body.arguments)
        if isinstance(arguments.get("duration_seconds"), float):
            arguments["duration_seconds"] = int(arguments["duration_seconds"])
        call = ToolCall(body.tool_call_id, body.conversation_id, body.tool, arguments)
        answer = await call_tool(runtime_of(request), call, fingerprint(raw))
        return Response(answer.body, status_code=answer.status, media_type=MediaType.JSON)

    @get("/operations/{operation_id:str}")
    async def operation(self, operation_id: FromPath[str], request: Request[Any, Any, Any]) -> dict[str, Any]:
        return await get_operation(runtime_of(request), inputs.uuid_naming(operation_id, "operation"))

"""The Agent Tool API (``Bearer $AGENT_TOKEN``)."""

from __future__ import annotations

import functools
import operator
from typing import Any, cast

from litestar import Controller, MediaType, Request, Response, get, post
from litestar.params import JSONBody

from service.api import inputs
from service.api.answers import Operation, ToolList, answer, refusals
from service.api.auth import AGENT_SECURITY, require
from service.api.bodies import ToolCallBody
from service.api.inputs import UuidPath
from service.domain.errors import Conflict
from service.domain.outcomes import SHARED_OUTCOMES
from service.http import status_of_kind
from service.tools import builtin
from service.use_cases.operation_status import get_operation
from service.use_cases.tool_calls import ToolCallRequest, call_tool
from service.web.state import runtime_of


def _answers(status: int) -> Any:
    """The answer types the shipped Tools give with ``status``, as one union (in their order)."""
    return functools.reduce(operator.or_, [r.answers[status] for r in builtin() if status in r.answers])


def _names(status: int) -> str:
    return ", ".join(r.name for r in builtin() if status in r.answers)


_CONFLICTS = tuple(
    outcome
    for registration in builtin()
    for outcome, kind in registration.outcomes.items()
    if issubclass(kind, Conflict)
) + tuple(outcome for outcome, kind in SHARED_OUTCOMES.items() if issubclass(kind, Conflict))


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
                _answers(202), "An operation tool accepted the call; its result comes through the outbox"
            ),
            200: answer(_answers(200), f"A direct tool's answer ({_names(200)})"),
            **refusals(
                {
                    404: ("unknown_tool",),
                    409: _CONFLICTS,
                    410: ("tool_call_expired",),
                    422: ("invalid_arguments",),
                },
                body=True,
            ),
        },
    )
    async def tool_call(
        self, data: JSONBody[ToolCallBody], request: Request[Any, Any, Any]
    ) -> Response[bytes]:
        call = ToolCallRequest(data.tool_call_id, data.conversation_id, data.tool, data.arguments)
        answered = await call_tool(runtime_of(request), call)
        return Response(answered.body, status_code=status_of_kind(answered.kind), media_type=MediaType.JSON)

    @get(
        "/operations/{operation_id:str}",
        summary="An operation (settled first when its deadline has passed)",
        responses=refusals({404: ("unknown_operation",)}, path=True),
    )
    async def operation(self, operation_id: UuidPath, request: Request[Any, Any, Any]) -> Operation:
        found = await get_operation(runtime_of(request), inputs.uuid_naming(operation_id, "operation"))
        return cast(Operation, found)

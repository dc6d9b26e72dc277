"""The Agent Tool API (``Bearer $AGENT_TOKEN``)."""

from __future__ import annotations

import functools
import operator
from typing import Any, cast

from litestar import Controller, Request, get, post
from litestar.openapi import ResponseSpec
from litestar.params import JSONBody
from litestar.response.base import ASGIResponse
from litestar.types import Receive, Scope, Send

from service.api import inputs
from service.api.answers import Operation, ToolList, answer, refusals
from service.api.auth import AGENT_SECURITY, require
from service.api.bodies import ToolCallBody
from service.api.inputs import UuidPath
from service.api.lean_route import lean_route
from service.domain.errors import Conflict
from service.domain.outcomes import SHARED_OUTCOMES
from service.http import status_of_kind
from service.manifests import Registry
from service.use_cases.operation_status import get_operation
from service.use_cases.tool_calls import ToolCallRequest, call_tool
from service.web.state import runtime_of


def typed_answers(registry: Registry, status: int) -> dict[str, list[Any]]:
    """The answer types of the registry's Tools (registered by outcome word) whose kind is answered
    with ``status``, by Tool, in their order: the status of a word is this face's to name."""
    found: dict[str, list[Any]] = {}
    for name in sorted(registry.runners):
        registration = registry.runners[name]
        for outcome, kind in registration.outcomes.items():
            typed = registration.answers.get(outcome)
            if typed is not None and status_of_kind(kind) == status:
                found.setdefault(name, []).append(typed)
    return found


def answer_types(registry: Registry, status: int) -> list[Any]:
    """Every answer type given with ``status``, once each, in the order of ``typed_answers``: the
    order of the union Litestar documents (``service.api.document`` tells them apart by Tool)."""
    return list(dict.fromkeys(typed for each in typed_answers(registry, status).values() for typed in each))


def _union(types: list[Any]) -> Any:
    return functools.reduce(operator.or_, types) if types else None


def _conflicts(registry: Registry) -> tuple[str, ...]:
    words = [
        outcome
        for name in sorted(registry.runners)
        for outcome, kind in registry.runners[name].outcomes.items()
        if issubclass(kind, Conflict)
    ]
    words += [outcome for outcome, kind in SHARED_OUTCOMES.items() if issubclass(kind, Conflict)]
    return tuple(dict.fromkeys(words))


# What every answer of the app carries (``create_app``'s response_headers), then its type and length
# (Litestar's own order of the first two follows its frozenset of them, so varies by process).
_ANSWER_HEADERS = ((b"x-content-type-options", b"nosniff"), (b"cache-control", b"no-store"))
_JSON = (b"content-type", b"application/json")


class ToolAnswerResponse(ASGIResponse):
    """A tool call's answer as ASGI messages, built from the recorded JSON text at once: the bytes
    and headers Litestar's ``Response`` would send, without its per-answer work (the response
    object, then an ASGI response with its header and cookie merging). Litestar passes an ASGI
    response through as it is (its handler's return type)."""

    __slots__ = ("_body", "_start")

    def __init__(self, body: bytes, status_code: int) -> None:  # nothing of ASGIResponse's state is used
        headers = [*_ANSWER_HEADERS, _JSON, (b"content-length", str(len(body)).encode())]
        self._start = {"type": "http.response.start", "status": status_code, "headers": headers}
        self._body = {"type": "http.response.body", "body": body, "more_body": False}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send(self._start)  # type: ignore[arg-type]
        await send(self._body)  # type: ignore[arg-type]


def agent_tool_controller(registry: Registry) -> type[Controller]:
    """The Agent Tool API of the apps of ``registry`` (the one ``create_app`` runs with): what it
    documents is what it runs."""
    accepted, direct = answer_types(registry, 202), answer_types(registry, 200)
    bodies: dict[int, ResponseSpec] = {}
    if accepted:
        bodies[202] = answer(
            _union(accepted), "An operation tool accepted the call; its result comes through the outbox"
        )
    if direct:
        bodies[200] = answer(
            _union(direct), f"A direct tool's answer ({', '.join(typed_answers(registry, 200))})"
        )

    class AgentToolController(_AgentToolController):
        @post(
            "/tool-calls",
            status_code=202,
            summary="Call a tool; tool_call_id is the idempotency key",
            description="arguments are checked against the tool's input_schema (GET /v1/tools). The same "
            "tool_call_id with the same body replays the first answer; 400, 401, 404, 413 and 422 record "
            "nothing, so the call may be corrected and retried under the same id. Each tool's answers "
            "are its own (x-answers-by-tool): the answer's schema is the called tool's.",
            responses={
                **bodies,
                **refusals(
                    {
                        404: ("unknown_tool",),
                        409: _conflicts(registry),
                        410: ("tool_call_expired",),
                        422: ("invalid_arguments",),
                    },
                    body=True,
                ),
            },
            # Every tool call takes this route: run without Litestar's parameter machinery (lean_route).
            middleware=[lean_route],
        )
        async def tool_call(
            self, data: JSONBody[ToolCallBody], request: Request[Any, Any, Any]
        ) -> ToolAnswerResponse:
            call = ToolCallRequest(data.tool_call_id, data.conversation_id, data.tool, data.arguments)
            answered = await call_tool(runtime_of(request), call)
            return ToolAnswerResponse(answered.body, status_of_kind(answered.kind))

    return AgentToolController


class _AgentToolController(Controller):
    path = "/v1"
    tags = ["Agent Tool API"]
    security = AGENT_SECURITY
    before_request = require("agent")

    @get("/tools", summary="The Agent Tools of every manifest", responses=refusals())
    async def list_tools(self, request: Request[Any, Any, Any]) -> ToolList:
        return cast(ToolList, {"tools": runtime_of(request).registry.public_tools()})

    @get(
        "/operations/{operation_id:str}",
        summary="An operation (settled first when its deadline has passed)",
        responses=refusals({404: ("unknown_operation",)}, path=True),
    )
    async def operation(self, operation_id: UuidPath, request: Request[Any, Any, Any]) -> Operation:
        found = await get_operation(runtime_of(request), inputs.uuid_naming(operation_id, "operation"))
        return cast(Operation, found)

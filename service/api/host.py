"""The Host API (``Bearer $HOST_TOKEN``): the workspace and app lifecycle."""

from __future__ import annotations

from typing import Annotated, Any, Literal
from uuid import UUID

from litestar import Controller, Request, get, post
from litestar.params import FromPath
from pydantic import Field, StringConstraints

from service.api import inputs
from service.api.auth import require
from service.api.bodies import StrictBody, read
from service.api.state import runtime_of
from service.use_cases import interactions, lifecycle, messages

Scope = Annotated[str, StringConstraints(min_length=1, max_length=64)]


class AppTarget(StrictBody):
    app_scope: Scope


class ForegroundBody(StrictBody):
    target: Literal["interact"] | AppTarget


class SurfaceEventBody(StrictBody):
    event: Literal["dimmed", "undimmed", "locked", "unlocked", "reloaded"]


class MessageBody(StrictBody):
    role: Literal["user", "agent"]
    text: Annotated[str, StringConstraints(min_length=1, max_length=8000)]
    sub_session_id: Annotated[UUID, Field(strict=False)] | None = None


class AnswerBody(StrictBody):
    answer: Annotated[str, StringConstraints(min_length=1, max_length=2000)]


class HostController(Controller):
    path = "/v1/host"
    before_request = require("host")

    @get("/conversations/{conversation_id:str}/workspace")
    async def workspace(
        self, conversation_id: FromPath[str], request: Request[Any, Any, Any]
    ) -> dict[str, Any]:
        return await lifecycle.get_workspace(runtime_of(request), inputs.conversation_id(conversation_id))

    @post("/conversations/{conversation_id:str}/workspace/foreground", status_code=200)
    async def foreground(
        self, conversation_id: FromPath[str], request: Request[Any, Any, Any]
    ) -> dict[str, Any]:
        body, _ = await read(request, ForegroundBody)
        scope = "interact" if body.target == "interact" else body.target.app_scope
        return await lifecycle.switch_foreground(
            runtime_of(request), inputs.conversation_id(conversation_id), scope
        )

    @post("/instances/{instance_id:str}/close", status_code=200)
    async def close(self, instance_id: FromPath[str], request: Request[Any, Any, Any]) -> dict[str, Any]:
        return await lifecycle.close_instance(
            runtime_of(request), inputs.uuid_naming(instance_id, "instance")
        )

    @post("/instances/{instance_id:str}/surface-events", status_code=200)
    async def surface_event(
        self, instance_id: FromPath[str], request: Request[Any, Any, Any]
    ) -> dict[str, Any]:
        body, _ = await read(request, SurfaceEventBody)
        return await lifecycle.record_surface_event(
            runtime_of(request), inputs.uuid_naming(instance_id, "instance"), body.event
        )

    @post("/conversations/{conversation_id:str}/messages", status_code=201)
    async def post_message(
        self, conversation_id: FromPath[str], request: Request[Any, Any, Any]
    ) -> dict[str, Any]:
        body, _ = await read(request, MessageBody)
        return await messages.post_message(
            runtime_of(request),
            inputs.conversation_id(conversation_id),
            body.role,
            body.text,
            body.sub_session_id,
        )

    @get("/conversations/{conversation_id:str}/messages")
    async def list_messages(
        self, conversation_id: FromPath[str], request: Request[Any, Any, Any]
    ) -> dict[str, Any]:
        return await messages.list_messages(
            runtime_of(request),
            inputs.conversation_id(conversation_id),
            inputs.optional_uuid(request.query_params.get("sub_session_id"), "sub_session_id"),
            inputs.limit(request.query_params.get("limit"), default=1000),
        )

    @post("/interactions/{tool_call_id:str}/answer", status_code=200)
    async def answer(self, tool_call_id: FromPath[str], request: Request[Any, Any, Any]) -> dict[str, Any]:
        body, _ = await read(request, AnswerBody)
        tool_call_id = inputs.existing_id(tool_call_id, "interaction")
        return await interactions.answer(runtime_of(request), tool_call_id, body.answer)

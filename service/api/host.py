"""The Host API (``Bearer $HOST_TOKEN``): the workspace and app lifecycle."""

from __future__ import annotations

from typing import Annotated, Any, Literal
from uuid import UUID

from litestar import Controller, Request, get, post
from litestar.params import FromPath
from pydantic import Field, StringConstraints

from service.api.auth import require
from service.api.bodies import StrictBody, read
from service.api.state import runtime_of
from service.api.tools import parse_uuid
from service.domain.errors import ApiError, not_found
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


def _query_uuid(request: Request[Any, Any, Any], name: str) -> UUID | None:
    value = request.query_params.get(name)
    if value is None:
        return None
    try:
        return UUID(value)
    except ValueError:
        raise ApiError(
            422,
            "invalid_request",
            f"{name} must be a UUID",
            details=[{"path": name, "message": "must be a UUID"}],
        ) from None


def _query_limit(request: Request[Any, Any, Any], default: int = 1000) -> int:
    value = request.query_params.get("limit")
    if value is None:
        return default
    # isascii: "²" is a digit to isdigit() but not to int().
    if not (value.isascii() and value.isdigit()) or not 1 <= int(value) <= 1000:
        raise ApiError(
            422,
            "invalid_request",
            "limit must be an integer from 1 to 1000",
            details=[{"path": "limit", "message": "an integer from 1 to 1000"}],
        )
    return int(value)


def _conversation(cid: str) -> str:
    if not 1 <= len(cid) <= 255 or "\x00" in cid:
        raise ApiError(
            422,
            "invalid_request",
            "conversation_id must be 1-255 characters",
            details=[{"path": "conversation_id", "message": "1-255 characters, no U+0000"}],
        )
    return cid


class HostController(Controller):
    path = "/v1/host"
    before_request = require("host")

    @get("/conversations/{conversation_id:str}/workspace")
    async def workspace(
        self, conversation_id: FromPath[str], request: Request[Any, Any, Any]
    ) -> dict[str, Any]:
        return await lifecycle.get_workspace(runtime_of(request), _conversation(conversation_id))

    @post("/conversations/{conversation_id:str}/workspace/foreground", status_code=200)
    async def foreground(
        self, conversation_id: FromPath[str], request: Request[Any, Any, Any]
    ) -> dict[str, Any]:
        body, _ = await read(request, ForegroundBody)
        scope = "interact" if body.target == "interact" else body.target.app_scope
        return await lifecycle.switch_foreground(runtime_of(request), _conversation(conversation_id), scope)

    @post("/instances/{instance_id:str}/close", status_code=200)
    async def close(self, instance_id: FromPath[str], request: Request[Any, Any, Any]) -> dict[str, Any]:
        return await lifecycle.close_instance(runtime_of(request), parse_uuid(instance_id, "instance"))

    @post("/instances/{instance_id:str}/surface-events", status_code=200)
    async def surface_event(
        self, instance_id: FromPath[str], request: Request[Any, Any, Any]
    ) -> dict[str, Any]:
        body, _ = await read(request, SurfaceEventBody)
        return await lifecycle.record_surface_event(
            runtime_of(request), parse_uuid(instance_id, "instance"), body.event
        )

    @post("/conversations/{conversation_id:str}/messages", status_code=201)
    async def post_message(
        self, conversation_id: FromPath[str], request: Request[Any, Any, Any]
    ) -> dict[str, Any]:
        body, _ = await read(request, MessageBody)
        return await messages.post_message(
            runtime_of(request),
            _conversation(conversation_id),
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
            _conversation(conversation_id),
            _query_uuid(request, "sub_session_id"),
            _query_limit(request),
        )

    @post("/interactions/{tool_call_id:str}/answer", status_code=200)
    async def answer(self, tool_call_id: FromPath[str], request: Request[Any, Any, Any]) -> dict[str, Any]:
        body, _ = await read(request, AnswerBody)
        if not 1 <= len(tool_call_id) <= 255 or "\x00" in tool_call_id:
            # No interaction can have this id, and Postgres text cannot hold U+0000.
            raise not_found("interaction")
        return await interactions.answer(runtime_of(request), tool_call_id, body.answer)

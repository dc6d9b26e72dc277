"""The Host API (``Bearer $HOST_TOKEN``): the workspace and app lifecycle."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from litestar import Controller, Request, get, post
from litestar.params import FromPath
from pydantic import StringConstraints

from service.api.auth import require
from service.api.bodies import StrictBody, read
from service.api.state import runtime_of
from service.api.tools import parse_uuid
from service.domain.errors import ApiError
from service.use_cases import lifecycle

Scope = Annotated[str, StringConstraints(min_length=1, max_length=64)]


class AppTarget(StrictBody):
    app_scope: Scope


class ForegroundBody(StrictBody):
    target: Literal["interact"] | AppTarget


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
    guards = [require("host")]

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

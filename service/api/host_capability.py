"""The Host API's capability endpoint (``Bearer $HOST_TOKEN``): SDK tokens for the Bridge."""

from __future__ import annotations

from typing import Any

from litestar import Controller, Request, post
from litestar.datastructures import CacheControlHeader
from litestar.params import FromPath

from service.api import inputs
from service.api.auth import require
from service.api.state import runtime_of
from service.use_cases.capabilities import mint_capability


class HostCapabilityController(Controller):
    path = "/v1/host"
    before_request = require("host")

    @post(
        "/instances/{instance_id:str}/capability",
        status_code=200,
        cache_control=CacheControlHeader(no_store=True),
    )
    async def capability(self, instance_id: FromPath[str], request: Request[Any, Any, Any]) -> dict[str, str]:
        return await mint_capability(runtime_of(request), inputs.uuid_naming(instance_id, "instance"))

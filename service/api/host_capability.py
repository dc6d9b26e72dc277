"""The Host API's capability endpoint (``Bearer $HOST_TOKEN``): SDK tokens for the Bridge."""

from __future__ import annotations

from typing import Any, cast

from litestar import Controller, Request, post
from litestar.datastructures import CacheControlHeader

from service.api import inputs
from service.api.answers import Capability, refusals
from service.api.auth import HOST_SECURITY, principal_of, require
from service.api.host_scope import where
from service.api.inputs import UuidPath
from service.use_cases.capabilities import mint_capability
from service.web.state import runtime_of


class HostCapabilityController(Controller):
    path = "/v1/host"
    tags = ["Host API"]
    security = HOST_SECURITY
    before_request = require("host")

    @post(
        "/instances/{instance_id:str}/capability",
        status_code=200,
        cache_control=CacheControlHeader(no_store=True),
        summary="Mint the SDK capability of an instance, for its Bridge only",
        response_description="A new capability",
        description="Minted under a person's session, the capability ends with that session, and a "
        "session mints at most CAPABILITIES_PER_SESSION (429 past it).",
        responses=refusals({404: ("unknown_instance",), 429: ("too_many_requests",)}, path=True),
        opt=where("instance"),
    )
    async def capability(self, instance_id: UuidPath, request: Request[Any, Any, Any]) -> Capability:
        minted = await mint_capability(
            runtime_of(request),
            inputs.uuid_naming(instance_id, "instance"),
            principal_of(request).session_id,
        )
        return cast(Capability, minted)

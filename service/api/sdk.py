"""The SDK API (``Bearer <instance capability>``): a MiniApp's view of its own instance.

The capability alone says which instance, app and conversation a request is about; no request
names them. Other APIs never accept a capability (they only know their own tokens), and this one
accepts nothing else.
"""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Controller, Request, get, post, put
from pydantic import Field

from service.api.auth import bearer_token
from service.api.bodies import StrictBody, read
from service.api.state import runtime_of
from service.domain.errors import unauthorized
from service.use_cases import instance_state, lifecycle, sdk_context
from service.use_cases.capabilities import Capability, resolve_capability

# Revisions are Postgres bigints.
MAX_REVISION = 2**63 - 1
# A state body may exceed the service-wide body limit: max_bytes is up to 1 MiB of compact JSON
# (manifest schema), which a client may send with spaces or \u escapes. Within this bound the
# contract's own answer (state_readonly, state_too_large, ...) is given, not a transport 413.
STATE_BODY_MAX_BYTES = 4 * 1024 * 1024


class StateWrite(StrictBody):
    expected_revision: Annotated[int, Field(ge=0, le=MAX_REVISION)]
    data: dict[str, Any]


class RequireCapability:
    """Before every SDK handler: the bearer token must be an instance capability."""

    async def __call__(self, connection: Request[Any, Any, Any]) -> None:
        """Resolve the bearer token to its instance binding and keep it on the request."""
        token = bearer_token(connection)
        capability = None if token is None else await resolve_capability(connection.app.state.runtime, token)
        if capability is None:
            raise unauthorized()
        connection.state.capability = capability


def capability_of(request: Request[Any, Any, Any]) -> Capability:
    capability: Capability = request.state.capability
    return capability


class SdkController(Controller):
    path = "/v1/sdk"
    before_request = RequireCapability()

    @get("/context")
    async def context(self, request: Request[Any, Any, Any]) -> dict[str, Any]:
        return await sdk_context.get_context(runtime_of(request), capability_of(request))

    @get("/state")
    async def state(self, request: Request[Any, Any, Any]) -> dict[str, Any]:
        return await instance_state.get_state(runtime_of(request), capability_of(request))

    @put("/state", request_max_body_size=STATE_BODY_MAX_BYTES)
    async def write_state(self, request: Request[Any, Any, Any]) -> dict[str, int]:
        runtime, capability = runtime_of(request), capability_of(request)
        # The contract answers feature_not_declared before looking at the body at all.
        instance_state.declared_feature(runtime, capability)
        body, _ = await read(request, StateWrite)
        return await instance_state.put_state(runtime, capability, body.expected_revision, body.data)

    @post("/navigation/close", status_code=200)
    async def close(self, request: Request[Any, Any, Any]) -> dict[str, Any]:
        return await lifecycle.close_instance(runtime_of(request), capability_of(request).instance_id)

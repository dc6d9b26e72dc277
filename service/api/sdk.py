"""The SDK API (``Bearer <instance capability>``): a MiniApp's view of its own instance.

The capability alone says which instance, app and conversation a request is about; no request
names them. Other APIs never accept a capability (they only know their own tokens), and this one
accepts nothing else.
"""

from __future__ import annotations

from typing import Any, cast

from litestar import Controller, Request, get, post, put
from litestar.params import JSONBody

from service.api.answers import CloseResult, InstanceState, SdkContext, StateRevision, refusals
from service.api.auth import CAPABILITY_SECURITY
from service.api.bodies import StateWrite
from service.http import bearer_token, refused
from service.use_cases import instance_state, lifecycle, sdk_context
from service.use_cases.capabilities import Capability, resolve_capability
from service.web.state import runtime_of

# A state body may exceed the service-wide body limit: max_bytes is up to 1 MiB of compact JSON
# (manifest schema), which a client may send with spaces or \u escapes. Within this bound the
# contract's own answer (state_readonly, state_too_large, ...) is given, not a transport 413.
STATE_BODY_MAX_BYTES = 4 * 1024 * 1024


class RequireCapability:
    """Before an SDK handler: the bearer token must be an instance capability; with
    ``state_feature``, its app must declare the instance-state feature — checked before the body
    is read, as the contract orders the errors of a state write."""

    def __init__(self, *, state_feature: bool = False) -> None:
        self.state_feature = state_feature

    async def __call__(self, connection: Request[Any, Any, Any]) -> None:
        """Resolve the bearer token to its instance binding and keep it on the request."""
        token = bearer_token(connection)
        runtime = runtime_of(connection)
        capability = None if token is None else await resolve_capability(runtime, token)
        if capability is None:
            raise refused(connection, "capability")
        connection.state.capability = capability
        if self.state_feature:
            instance_state.declared_feature(runtime, capability)


def capability_of(request: Request[Any, Any, Any]) -> Capability:
    capability: Capability = request.state.capability
    return capability


class SdkController(Controller):
    path = "/v1/sdk"
    tags = ["SDK API"]
    security = CAPABILITY_SECURITY
    before_request = RequireCapability()

    @get(
        "/context",
        summary="The capability's instance, its operation and the server clock",
        response_description="The context",
        responses=refusals(),
    )
    async def context(self, request: Request[Any, Any, Any]) -> SdkContext:
        found = await sdk_context.get_context(runtime_of(request), capability_of(request))
        return cast(SdkContext, found)

    @get(
        "/state",
        summary="The instance's state snapshot",
        response_description="The snapshot",
        responses=refusals({403: ("feature_not_declared",)}),
    )
    async def state(self, request: Request[Any, Any, Any]) -> InstanceState:
        found = await instance_state.get_state(runtime_of(request), capability_of(request))
        return cast(InstanceState, found)

    @put(
        "/state",
        request_max_body_size=STATE_BODY_MAX_BYTES,
        before_request=RequireCapability(state_feature=True),
        summary="Compare-and-set the instance's state snapshot",
        description="Refusals, checked in this order: 403 feature_not_declared, 422 invalid_request "
        "(expected_revision is a JSON integer written without a fraction: 1.0 is refused), 409 "
        "state_readonly, 413 state_too_large (compact UTF-8 JSON of data over the manifest's max_bytes), "
        "422 state_schema_violation, 409 revision_conflict (with the current revision).",
        response_description="The new revision",
        responses=refusals(
            {
                403: ("feature_not_declared",),
                409: ("state_readonly", "revision_conflict"),
                413: ("state_too_large",),
                422: ("state_schema_violation",),
            },
            body=True,
        ),
    )
    async def write_state(self, data: JSONBody[StateWrite], request: Request[Any, Any, Any]) -> StateRevision:
        written = await instance_state.put_state(
            runtime_of(request), capability_of(request), data.expected_revision, data.data
        )
        return cast(StateRevision, written)

    @post(
        "/navigation/close",
        status_code=200,
        summary="Close the capability's instance (the Host's close)",
        response_description="The closed instance",
        responses=refusals(),
    )
    async def close(self, request: Request[Any, Any, Any]) -> CloseResult:
        closed = await lifecycle.close_instance(runtime_of(request), capability_of(request).instance_id)
        return cast(CloseResult, closed)

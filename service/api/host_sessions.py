"""Persons' sessions on the Host API, minted and revoked by the Host backend (``Bearer $HOST_TOKEN``)."""

from __future__ import annotations

from typing import Any, cast

from litestar import Controller, Request, delete, post
from litestar.params import JSONBody

from service.api import inputs
from service.api.answers import HostSession, refusals
from service.api.auth import require
from service.api.bodies import SessionRequest
from service.api.host_scope import where
from service.api.inputs import UuidPath
from service.domain.errors import not_found
from service.host_streams import HostStreams
from service.use_cases import host_sessions
from service.use_cases.host_sessions import SessionTokens
from service.web.state import runtime_of


class HostSessionsController(Controller):
    path = "/v1/host/sessions"
    tags = ["Host API"]
    # The backend's own credential only: a person's session can neither mint nor end sessions.
    security = [{"host": []}]
    before_request = require("host")

    @post(
        "/",
        status_code=201,
        opt=where("backend"),
        summary="Mint a session for one person, scoped to their conversations",
        description="The token works as `Authorization: Bearer <token>` on /v1/host/ and as the host "
        "page's sign-in, within its conversations only: anything else answers 404 as if it did not "
        "exist, and it cannot post `role: agent` messages (403).",
        response_description="The session and its token",
        responses=refusals({503: ("sessions_disabled",)}, body=True),
    )
    async def mint(self, data: JSONBody[SessionRequest], request: Request[Any, Any, Any]) -> HostSession:
        tokens: SessionTokens = request.app.state.session_tokens
        minted = await host_sessions.mint(
            runtime_of(request), tokens, data.subject, list(data.conversation_ids), data.ttl_seconds
        )
        return cast(HostSession, minted)

    @delete(
        "/{session_id:str}",
        status_code=204,
        opt=where("backend"),
        summary="End a session now; its token and cookie answer 401 from then on",
        responses=refusals({404: ("unknown_session",)}, path=True),
    )
    async def revoke(self, session_id: UuidPath, request: Request[Any, Any, Any]) -> None:
        ended = inputs.uuid_naming(session_id, "session")
        if not await host_sessions.revoke(runtime_of(request), ended):
            raise not_found("session")
        # Its event streams here end now; other replicas' within SSE_SESSION_CHECK_SECONDS.
        feeds: HostStreams = request.app.state.host_streams
        feeds.end_session(ended)

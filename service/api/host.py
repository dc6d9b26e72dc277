"""The Host API (``Bearer $HOST_TOKEN``): the workspace and app lifecycle."""

from __future__ import annotations

from typing import Any, cast

from litestar import Controller, Request, get, post
from litestar.params import JSONBody

from service.api import inputs
from service.api.answers import (
    CloseResult,
    FormsReceipt,
    InteractionReceipt,
    Message,
    MessageList,
    SurfaceEventResult,
    Workspace,
    refusals,
)
from service.api.auth import HOST_SECURITY, principal_of, require
from service.api.bodies import AnswerBody, ForegroundBody, FormsAnswerBody, MessageBody, SurfaceEventBody
from service.api.host_scope import where
from service.api.inputs import ConversationQuery, IdPath, LimitQuery, NewIdPath, UuidPath, UuidQuery
from service.domain.errors import Forbidden
from service.use_cases import interactions, lifecycle, messages
from service.web.state import runtime_of

CONVERSATION_ERRORS = {422: ("invalid_request",)}
# A write past its conversation's or session's allowance (service.use_cases.write_limits).
WRITE_LIMITED = {429: ("too_many_requests",)}


class HostController(Controller):
    path = "/v1/host"
    tags = ["Host API"]
    security = HOST_SECURITY
    before_request = require("host")

    @get(
        "/conversations/{conversation_id:str}/workspace",
        summary="The conversation's workspace",
        response_description="The workspace (empty, Interact in front, for a new conversation)",
        responses=refusals(CONVERSATION_ERRORS, path=True),
        opt=where("path"),
    )
    async def workspace(self, conversation_id: IdPath, request: Request[Any, Any, Any]) -> Workspace:
        found = await lifecycle.get_workspace(runtime_of(request), inputs.conversation_id(conversation_id))
        return cast(Workspace, found)

    @post(
        "/conversations/{conversation_id:str}/workspace/foreground",
        status_code=200,
        summary="Bring Interact or an app to the foreground",
        response_description="The workspace after the switch",
        responses=refusals(
            {404: ("unknown_app",), 409: ("app_not_resumable",), **WRITE_LIMITED}, body=True, path=True
        ),
        opt=where("path"),
    )
    async def foreground(
        self, conversation_id: NewIdPath, data: JSONBody[ForegroundBody], request: Request[Any, Any, Any]
    ) -> Workspace:
        scope = "interact" if data.target == "interact" else data.target.app_scope
        cid = inputs.new_conversation_id(conversation_id)
        session = principal_of(request).session_id
        return cast(Workspace, await lifecycle.switch_foreground(runtime_of(request), cid, scope, session))

    @post(
        "/instances/{instance_id:str}/close",
        status_code=200,
        summary="Close an app instance (cancels its focusing operation); closing twice is a no-op",
        response_description="The closed instance",
        responses=refusals({404: ("unknown_instance",)}, path=True),
        opt=where("instance"),
    )
    async def close(self, instance_id: UuidPath, request: Request[Any, Any, Any]) -> CloseResult:
        instance = inputs.uuid_naming(instance_id, "instance")
        return cast(CloseResult, await lifecycle.close_instance(runtime_of(request), instance))

    @post(
        "/instances/{instance_id:str}/surface-events",
        status_code=200,
        summary="Record a surface event; it never changes an operation",
        response_description="Recorded",
        responses=refusals({404: ("unknown_instance",), **WRITE_LIMITED}, body=True, path=True),
        opt=where("instance"),
    )
    async def surface_event(
        self, instance_id: UuidPath, data: JSONBody[SurfaceEventBody], request: Request[Any, Any, Any]
    ) -> SurfaceEventResult:
        instance = inputs.uuid_naming(instance_id, "instance")
        session = principal_of(request).session_id
        recorded = await lifecycle.record_surface_event(runtime_of(request), instance, data.event, session)
        return cast(SurfaceEventResult, recorded)

    @post(
        "/conversations/{conversation_id:str}/messages",
        status_code=201,
        summary="Post a message to the conversation or to one of its sub-sessions",
        response_description="The message",
        responses=refusals(
            {
                403: ("forbidden",),
                404: ("unknown_sub_session",),
                409: ("sub_session_ended",),
                **WRITE_LIMITED,
            },
            body=True,
            path=True,
        ),
        opt=where("path"),
    )
    async def post_message(
        self, conversation_id: NewIdPath, data: JSONBody[MessageBody], request: Request[Any, Any, Any]
    ) -> Message:
        if data.role == "agent" and not principal_of(request).is_backend:
            raise Forbidden("a person's session cannot post as the Agent")
        posted = await messages.post_message(
            runtime_of(request),
            inputs.new_conversation_id(conversation_id),
            data.role,
            data.text,
            data.sub_session_id,
            principal_of(request).session_id,
        )
        return cast(Message, posted)

    @get(
        "/conversations/{conversation_id:str}/messages",
        summary="Messages, oldest first: the main conversation, or one sub-session",
        response_description="The messages",
        responses=refusals({404: ("unknown_sub_session",), **CONVERSATION_ERRORS}, path=True),
        opt=where("path"),
    )
    async def list_messages(
        self,
        conversation_id: IdPath,
        request: Request[Any, Any, Any],
        sub_session_id: UuidQuery = None,
        limit: LimitQuery = None,
    ) -> MessageList:
        listed = await messages.list_messages(
            runtime_of(request),
            inputs.conversation_id(conversation_id),
            inputs.optional_uuid(sub_session_id, "sub_session_id"),
            inputs.limit(limit, default=1000),
        )
        return cast(MessageList, listed)

    @post(
        "/interactions/{tool_call_id:str}/answer",
        status_code=200,
        summary="Answer a pending interaction; answering again returns the first receipt",
        response_description="The receipt",
        responses=refusals(
            {404: ("unknown_interaction",), 409: ("ambiguous_tool_call_id",), 422: ("invalid_answer",)},
            body=True,
            path=True,
        ),
        opt=where("interaction"),
    )
    async def answer(
        self,
        tool_call_id: IdPath,
        data: JSONBody[AnswerBody],
        request: Request[Any, Any, Any],
        conversation_id: ConversationQuery = None,
    ) -> InteractionReceipt:
        tool_call_id = inputs.existing_id(tool_call_id, "interaction")
        named = inputs.optional_conversation_id(conversation_id)
        reach = principal_of(request).conversation_ids
        receipt = await interactions.answer(
            runtime_of(request), tool_call_id, data.answer, conversation_id=named, reach=reach
        )
        return cast(InteractionReceipt, receipt)

    @post(
        "/interactions/{tool_call_id:str}/answers",
        status_code=200,
        summary="Answer forms of an app's question, each once; answering a form again returns the receipt",
        response_description="The receipt: the question's state and its answers so far",
        responses=refusals(
            {404: ("unknown_interaction",), 409: ("ambiguous_tool_call_id",), 422: ("invalid_answer",)},
            body=True,
            path=True,
        ),
        opt=where("interaction"),
    )
    async def answer_forms(
        self,
        tool_call_id: IdPath,
        data: JSONBody[FormsAnswerBody],
        request: Request[Any, Any, Any],
        conversation_id: ConversationQuery = None,
    ) -> FormsReceipt:
        tool_call_id = inputs.existing_id(tool_call_id, "interaction")
        named = inputs.optional_conversation_id(conversation_id)
        reach = principal_of(request).conversation_ids
        receipt = await interactions.answer_forms(
            runtime_of(request), tool_call_id, dict(data.answers), conversation_id=named, reach=reach
        )
        return cast(FormsReceipt, receipt)

"""``interact.ask`` answered by the MCP client itself: elicitation.

At 2025-11-25, a session whose client declared ``elicitation`` (form mode) gets the question as an
``elicitation/create`` request and the ``tools/call`` waits for the answer: choices as a string
``enum``, free text as a string of 1 to 2000 characters, under the one property ``answer``. The
request rides the session's standalone stream (its open ``GET``): every answer of this server is
one JSON body, which cannot carry a request. The answer is recorded exactly as the Host's answer
is (``service.use_cases.interactions.answer``: one decision under the conversation's lock; whichever
answer comes first wins, the other gets the first one's receipt), and the call's result is the
interaction's result, as the relay delivers it. The Host may answer while the elicitation is open:
the call then ends with that answer (and the elicitation is cancelled). A declined or cancelled
elicitation leaves the question open for the Host; the call then answers what it always did, the
``202`` body.

A question of an app's own forms (``app_ask``, the Runtime API) is elicited form by form, each
with its app's ``requestedSchema`` and message, the answer object recorded against its form (an
answer that does not fit is ``-32602``, never stored: the question stays open); the call's result
is the question's, once every form is answered. A declined or cancelled form leaves the rest open.

At 2026-07-28 the tasks extension carries the same request: an interaction's task reads
``input_required`` with it in ``inputRequests`` (under ``ANSWER_KEY``) for a request that declares
elicitation, and ``tasks/update`` with ``inputResponses`` answers it (``service.mcp.tasks_extension``);
an app's forms are one input request each, under their keys.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any
from uuid import UUID

import mcp_types as types
import structlog
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError

from service.domain.errors import Refusal
from service.mcp.tasks import until_final
from service.mcp.tools import Answer, call_result
from service.projection_hub import ProjectionHub
from service.use_cases import interactions, tasks
from service.use_cases.runtime import Runtime

log = structlog.get_logger("service.mcp")

Ctx = ServerRequestContext[Any, Any]

#: The key of the one input request an interaction's task has (and of its response).
ANSWER_KEY = "answer"


def elicits(capabilities: types.ClientCapabilities | None) -> bool:
    """Whether these client capabilities take a form-mode ``elicitation/create`` (an empty
    ``elicitation`` object means form mode, for clients of 2025-06-18)."""
    elicitation = capabilities.elicitation if capabilities is not None else None
    return elicitation is not None and (elicitation.form is not None or elicitation.url is None)


def requested_schema(choices: list[str]) -> dict[str, Any]:
    """The form of the question: one string property ``answer``, an ``enum`` of the choices."""
    answer: dict[str, Any] = {"type": "string", "title": "Your answer"}
    if choices:
        answer["enum"] = list(choices)
    else:
        answer |= {"minLength": 1, "maxLength": 2000}
    return {"type": "object", "properties": {ANSWER_KEY: answer}, "required": [ANSWER_KEY]}


def input_request(prompt: str, choices: list[str]) -> dict[str, Any]:
    """The ``elicitation/create`` request of a question, as the tasks extension carries it."""
    return {
        "method": "elicitation/create",
        "params": {"mode": "form", "message": prompt, "requestedSchema": requested_schema(choices)},
    }


def accepted_text(response: Any) -> str | None:
    """The answer in an ``ElicitResult`` (a model or its wire dict): None unless accepted with a
    string ``answer``."""
    if isinstance(response, types.ElicitResult):
        response = response.model_dump(mode="json")
    if not isinstance(response, dict):
        return None
    action, content = response.get("action"), response.get("content")
    value = content.get(ANSWER_KEY) if action == "accept" and isinstance(content, dict) else None
    return value if isinstance(value, str) else None


def accepted_content(response: Any) -> dict[str, Any] | None:
    """The content of an ``ElicitResult`` (a model or its wire dict) answering an app's form: None
    unless accepted with an object."""
    if isinstance(response, types.ElicitResult):
        response = response.model_dump(mode="json")
    if not isinstance(response, dict) or response.get("action") != "accept":
        return None
    content = response.get("content")
    return content if isinstance(content, dict) else None


def form_request(form: dict[str, Any]) -> dict[str, Any]:
    """The ``elicitation/create`` request of one of an app's forms, as the tasks extension carries it."""
    return {
        "method": "elicitation/create",
        "params": {"mode": "form", "message": form["message"], "requestedSchema": form["requestedSchema"]},
    }


def answered_text(result: dict[str, Any]) -> str:
    """A person's answer as a tool result's text: interact.ask's answer, or an app's forms' answers."""
    if "answers" in result:
        return f"The person answered: {json.dumps(result['answers'], ensure_ascii=False)}"
    return f"The person answered: {result['answer']}"


async def record_forms(rt: Runtime, tool_call_id: str, conversation_id: str, given: dict[str, Any]) -> None:
    """The person's answers to an app's forms through the client, decided as the Host's are (each
    form once); an answer that does not fit its form is the protocol's invalid params."""
    try:
        await interactions.answer_forms(rt, tool_call_id, given, conversation_id=conversation_id)
    except Refusal as refusal:
        raise MCPError(types.INVALID_PARAMS, refusal.message, data=refusal.body()) from None


async def record(rt: Runtime, tool_call_id: str, conversation_id: str, text: str) -> None:
    """The person's answer through the client, decided as the Host's is; an answer outside the
    choices is the protocol's invalid params."""
    try:
        await interactions.answer(rt, tool_call_id, text, conversation_id=conversation_id)
    except Refusal as refusal:
        raise MCPError(types.INVALID_PARAMS, refusal.message, data=refusal.body()) from None


def _answered(task: dict[str, Any], answer: Answer) -> dict[str, Any]:
    result = task["result"]
    return {
        "content": [{"type": "text", "text": answered_text(result)}],
        "structuredContent": result,
        "isError": False,
        "_meta": call_result(answer)["_meta"],
        "resultType": "complete",
    }


async def _elicited(
    ctx: Ctx, tool_call_id: str, message: str, schema: dict[str, Any]
) -> types.ElicitResult | None:
    """The client's response to one ``elicitation/create``; None when it answered with an error."""
    try:
        return await ctx.session.elicit_form(message, schema)
    except MCPError as exc:
        log.info("mcp_elicitation_refused", tool_call_id=tool_call_id, error=exc.message)
        return None


async def _elicit_answer(
    rt: Runtime, ctx: Ctx, tool_call_id: str, conversation_id: str, interaction: dict[str, Any]
) -> bool:
    """interact.ask's one question, elicited; whether the person answered it (a choice outside
    the offered ones is invalid params)."""
    response = await _elicited(
        ctx, tool_call_id, interaction["prompt"], requested_schema(list(interaction["choices"]))
    )
    text = accepted_text(response)
    if text is None:
        return False
    await record(rt, tool_call_id, conversation_id, text)
    return True


async def _elicit_forms(rt: Runtime, ctx: Ctx, tool_call_id: str, conversation_id: str, task_id: str) -> bool:
    """An app's forms elicited one after the other, each not yet answered (the Host may answer
    some meanwhile); whether the person answered every one. A declined or cancelled form stops
    there: the rest stay open for the Host."""
    asked = await interactions.asked_by_task(rt, UUID(task_id))
    if asked is None:
        return False
    for key, form in asked["forms"].items():
        if key in asked["answers"]:
            continue
        content = accepted_content(
            await _elicited(ctx, tool_call_id, form["message"], form["requestedSchema"])
        )
        if content is None:
            return False
        await record_forms(rt, tool_call_id, conversation_id, {key: content})
    return True


async def ask(rt: Runtime, hub: ProjectionHub, ctx: Ctx, answer: Answer) -> dict[str, Any] | None:
    """Ask an accepted ``interact.ask`` through the session and wait for the answer, the client's
    or the Host's; the call's result, or None when it stays open (declined, cancelled, no answer)."""
    binding = answer.binding
    interaction = answer.body["interaction"]
    task = await tasks.interaction_task(rt, binding.tool_call_id, binding.conversation_id)
    if task is None:
        return None
    if task["state"] != "pending":  # a replay of a question answered meanwhile
        return _answered(task, answer)

    async def read() -> dict[str, Any]:
        again = await tasks.interaction_task(rt, binding.tool_call_id, binding.conversation_id)
        assert again is not None
        return again

    by_host = asyncio.create_task(until_final(hub, read, task), name="mcp-interaction-wait")
    if "forms" in interaction:
        asking = _elicit_forms(rt, ctx, binding.tool_call_id, binding.conversation_id, task["task_id"])
    else:
        asking = _elicit_answer(rt, ctx, binding.tool_call_id, binding.conversation_id, interaction)
    by_client = asyncio.create_task(asking, name="mcp-elicitation")
    try:
        await asyncio.wait({by_host, by_client}, return_when=asyncio.FIRST_COMPLETED)
        # (An answer that does not fit raises -32602 from by_client.result().)
        if not by_host.done() and not by_client.result():
            return None  # declined, cancelled or refused: the question stays open for the Host
        return _answered(await read(), answer)
    finally:
        for waiting in (by_host, by_client):
            if not waiting.done():
                waiting.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await waiting

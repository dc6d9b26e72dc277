"""Interact standard interactions: the person's answer to an ``interact.ask``.

An interaction belongs to the conversation, not to the app that was in front when it was asked
(the ``interact_ask`` SQL function, run by ``call_tool``): closing that app leaves it pending in the
main IM, and its answer goes to the main conversation.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from jsonschema import Draft202012Validator
from psycopg.rows import DictRow

from service.app_manifest import FORMAT_CHECKER
from service.db import interactions as inter_db
from service.db import workspaces as ws_db
from service.domain.errors import AmbiguousToolCallId, InvalidAnswer, not_found
from service.domain.timefmt import rfc3339_or_none
from service.json_errors import ErrorDetail, json_path, validate
from service.use_cases.runtime import Runtime
from service.use_cases.serializers import interaction_view


def _receipt(row: DictRow) -> dict[str, Any]:
    view = interaction_view(row)
    return {
        "tool_call_id": view["tool_call_id"],
        "status": "answered",
        "answer": view["answer"],
        "answered_at": view["answered_at"],
    }


async def conversation_of(rt: Runtime, tool_call_id: str, reach: frozenset[str] | None = None) -> str | None:
    """The conversation of the interaction asked by ``tool_call_id`` among those in ``reach``
    (None: every conversation); None when there is none. ``tool_call_id`` is unique per
    conversation only: when it matches in more than one, ``AmbiguousToolCallId`` (the caller names
    the conversation)."""
    async with rt.unit_of_work(transaction=False) as work:
        found = await inter_db.conversations_of(
            work.conn, tool_call_id, None if reach is None else sorted(reach)
        )
    if len(found) > 1:
        raise AmbiguousToolCallId("interaction")
    return found[0] if found else None


async def _named(
    rt: Runtime, tool_call_id: str, conversation_id: str | None, reach: frozenset[str] | None
) -> str:
    """The conversation of the question to answer: the one named, within ``reach``, or else the one
    ``conversation_of`` finds; ``not_found`` when there is none."""
    if conversation_id is not None and reach is not None and conversation_id not in reach:
        raise not_found("interaction")
    if conversation_id is None:
        conversation_id = await conversation_of(rt, tool_call_id, reach)
        if conversation_id is None:
            raise not_found("interaction")
    return conversation_id


async def answer(
    rt: Runtime,
    tool_call_id: str,
    answer_text: str,
    *,
    conversation_id: str | None = None,
    reach: frozenset[str] | None = None,
) -> dict[str, Any]:
    """Decide the interaction once; answering again returns the first receipt. Without
    ``conversation_id`` the interaction is found by its ``tool_call_id`` within ``reach`` first
    (before the transaction, which then names the conversation in every statement): 409
    ``ambiguous_tool_call_id`` when the id matches in more than one conversation."""
    conversation_id = await _named(rt, tool_call_id, conversation_id, reach)
    async with rt.unit_of_work() as work:
        conn = work.conn
        if not await ws_db.lock_existing(conn, conversation_id):
            raise not_found("interaction")
        interaction = await inter_db.get(conn, conversation_id, tool_call_id)
        if interaction is None:
            raise not_found("interaction")
        if interaction["status"] == "answered":
            return _receipt(interaction)
        if interaction["forms"] is not None:
            raise InvalidAnswer(
                "this question asks forms of its own: answer them with an object per form, under answers",
                details=[
                    {"path": "answers", "message": f"one object per form: {sorted(interaction['forms'])}"}
                ],
            )
        choices = list(interaction["choices"])
        if choices and answer_text not in choices:
            raise InvalidAnswer(
                "the answer must be one of the offered choices",
                details=[{"path": "answer", "message": f"one of {choices}"}],
            )
        decided = await inter_db.answer(conn, conversation_id, tool_call_id, answer_text)
        assert decided is not None  # the workspace lock keeps anyone else from deciding it
        work.changed(decided["conversation_id"], outbox=True)
        return _receipt(decided)


def _forms_receipt(row: DictRow) -> dict[str, Any]:
    return {
        "tool_call_id": row["tool_call_id"],
        "status": row["status"],
        "answers": row["answers"] or {},
        "answered_at": rfc3339_or_none(row["answered_at"]),
    }


def _checked(forms: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    """The answers given to forms not yet answered, each checked against its form (MCP elicitation's
    requestedSchema, with JSON Schema's formats asserted) and kept to its form's properties; any
    answer that does not fit is ``InvalidAnswer``, naming each fault, and nothing is recorded."""
    kept: dict[str, Any] = {}
    details: list[ErrorDetail] = []
    for key, content in given.items():
        form = forms.get(key)
        if form is None:
            where = json_path("answers", [key])
            details.append(ErrorDetail(where, f"not a form of this question: {sorted(forms)}"))
            continue
        validator = Draft202012Validator(form["requestedSchema"], format_checker=FORMAT_CHECKER)
        faults = validate(validator, content, json_path("answers", [key]))
        if faults:
            details.extend(faults)
            continue
        declared = form["requestedSchema"].get("properties", {})
        kept[key] = {name: value for name, value in content.items() if name in declared}
    if details:
        raise InvalidAnswer("each answer must fit its form", details=[detail.as_dict() for detail in details])
    return kept


async def answer_forms(
    rt: Runtime,
    tool_call_id: str,
    given: dict[str, Any],
    *,
    conversation_id: str | None = None,
    reach: frozenset[str] | None = None,
) -> dict[str, Any]:
    """Answer forms of an app's question (``app_ask``): ``given`` maps a form's key to its content.
    Each form is decided once: one already answered keeps its first answer, and the call gets the
    receipt (the answers so far); the answers to the others are checked against their forms first
    (``InvalidAnswer``: nothing recorded). The answer completing the last form decides the question
    and queues the call's one result. Found as ``answer`` finds a question."""
    conversation_id = await _named(rt, tool_call_id, conversation_id, reach)
    async with rt.unit_of_work() as work:
        conn = work.conn
        if not await ws_db.lock_existing(conn, conversation_id):
            raise not_found("interaction")
        interaction = await inter_db.get(conn, conversation_id, tool_call_id)
        if interaction is None:
            raise not_found("interaction")
        forms = interaction["forms"]
        if forms is None:
            raise InvalidAnswer(
                "this question takes one answer (a choice or free text), under answer",
                details=[{"path": "answer", "message": "is required"}],
            )
        answered = interaction["answers"] or {}
        fresh = {key: content for key, content in given.items() if key not in answered}
        if interaction["status"] == "answered" or not fresh:
            return _forms_receipt(interaction)
        decided = await inter_db.answer_forms(conn, conversation_id, tool_call_id, _checked(forms, fresh))
        assert decided is not None  # the workspace lock keeps anyone else from deciding it
        work.changed(decided["conversation_id"], outbox=decided["status"] == "answered")
        return _forms_receipt(decided)


async def asked_by_task(rt: Runtime, task_id: UUID) -> dict[str, Any] | None:
    """The interaction behind an ``interact.ask`` task (its question, choices and state)."""
    async with rt.unit_of_work(transaction=False) as work:
        row = await inter_db.by_task(work.conn, task_id)
    return None if row is None else interaction_view(row)

"""Interact standard interactions: the person's answer to an ``interact.ask``.

An interaction belongs to the conversation, not to the app that was in front when it was asked
(the ``interact_ask`` SQL function, run by ``call_tool``): closing that app leaves it pending in the
main IM, and its answer goes to the main conversation.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from psycopg.rows import DictRow

from service.db import interactions as inter_db
from service.db import workspaces as ws_db
from service.domain.errors import AmbiguousToolCallId, InvalidAnswer, not_found
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
    if conversation_id is not None and reach is not None and conversation_id not in reach:
        raise not_found("interaction")
    if conversation_id is None:
        conversation_id = await conversation_of(rt, tool_call_id, reach)
        if conversation_id is None:
            raise not_found("interaction")
    async with rt.unit_of_work() as work:
        conn = work.conn
        if not await ws_db.lock_existing(conn, conversation_id):
            raise not_found("interaction")
        interaction = await inter_db.get(conn, conversation_id, tool_call_id)
        if interaction is None:
            raise not_found("interaction")
        if interaction["status"] == "answered":
            return _receipt(interaction)
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


async def asked_by_task(rt: Runtime, task_id: UUID) -> dict[str, Any] | None:
    """The interaction behind an ``interact.ask`` task (its question, choices and state)."""
    async with rt.unit_of_work(transaction=False) as work:
        row = await inter_db.by_task(work.conn, task_id)
    return None if row is None else interaction_view(row)

"""Interact standard interactions: ``interact.ask`` and the person's answer.

An interaction belongs to the conversation, not to the app that was in front when it was asked:
closing that app leaves it pending in the main IM, and its answer goes to the main conversation.
"""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import DictRow

from service.db import interactions as inter_db
from service.db import workspaces as ws_db
from service.domain.errors import ApiError, not_found
from service.use_cases.overdue import settle_overdue
from service.use_cases.runtime import Runtime
from service.use_cases.tool_call import ToolCall
from service.use_cases.views import interaction_view

Answer = tuple[int, dict[str, Any]]


async def ask(conn: AsyncConnection[DictRow], rt: Runtime, call: ToolCall) -> Answer:
    await ws_db.lock_or_create(conn, call.conversation_id)
    # A Pomodoro whose deadline passed is no longer in front: settle it before looking.
    await settle_overdue(conn, call.conversation_id)
    workspace = await ws_db.get(conn, call.conversation_id)
    assert workspace is not None
    sub_session_id = None
    if workspace["foreground_instance_id"] is not None:
        instance = await ws_db.instance(conn, workspace["foreground_instance_id"])
        if instance is not None and instance["status"] == "open":
            sub_session_id = instance["sub_session_id"]
    row = await inter_db.ask(
        conn,
        tool_call_id=call.tool_call_id,
        conversation_id=call.conversation_id,
        prompt=call.arguments["prompt"],
        choices=list(call.arguments.get("choices", [])),
        sub_session_id=sub_session_id,
    )
    return 202, {
        "tool_call_id": call.tool_call_id,
        "status": "accepted",
        "interaction": {
            key: value for key, value in interaction_view(row).items() if key not in ("answer", "answered_at")
        },
    }


def _receipt(row: DictRow) -> dict[str, Any]:
    view = interaction_view(row)
    return {
        "tool_call_id": view["tool_call_id"],
        "status": "answered",
        "answer": view["answer"],
        "answered_at": view["answered_at"],
    }


async def answer(rt: Runtime, tool_call_id: str, answer_text: str) -> dict[str, Any]:
    """Decide the interaction once; answering again returns the first receipt."""
    async with rt.transaction() as conn:
        interaction = await inter_db.get(conn, tool_call_id)
        if interaction is None:
            raise not_found("interaction")
        await ws_db.lock_existing(conn, interaction["conversation_id"])
        interaction = await inter_db.get(conn, tool_call_id)
        assert interaction is not None
        if interaction["status"] == "answered":
            return _receipt(interaction)
        choices = list(interaction["choices"])
        if choices and answer_text not in choices:
            raise ApiError(
                422,
                "invalid_answer",
                "the answer must be one of the offered choices",
                details=[{"path": "answer", "message": f"one of {choices}"}],
            )
        decided = await inter_db.answer(conn, tool_call_id, answer_text)
        assert decided is not None  # the workspace lock keeps anyone else from deciding it
        return _receipt(decided)

"""The wire shapes of rows: operations, workspaces."""

from __future__ import annotations

from typing import Any

from psycopg.rows import DictRow

from service.domain.operations import State
from service.domain.timefmt import rfc3339, rfc3339_or_none


def operation_view(row: DictRow) -> dict[str, Any]:
    """The object of ``GET /v1/operations/{id}``."""
    return {
        "operation_id": str(row["operation_id"]),
        "tool": row["tool"],
        "tool_call_id": row["tool_call_id"],
        "conversation_id": row["conversation_id"],
        "app_scope": row["app_scope"],
        "instance_id": str(row["instance_id"]),
        "state": row["state"],
        "reason": row["reason"],
        "activity": row["activity"],
        "duration_seconds": row["duration_seconds"],
        "started_at": rfc3339(row["started_at"]),
        "ends_at": rfc3339(row["ends_at"]),
        "finalized_at": rfc3339_or_none(row["finalized_at"]),
        "done": row["state"] != State.FOCUSING,
        "result": row["result"],
    }


def operation_brief(row: DictRow) -> dict[str, Any]:
    """The short form carried in close answers."""
    return {"operation_id": str(row["operation_id"]), "state": row["state"], "reason": row["reason"]}


def message_view(row: DictRow) -> dict[str, Any]:
    return {
        "message_id": str(row["message_id"]),
        "conversation_id": row["conversation_id"],
        "sub_session_id": str(row["sub_session_id"]) if row["sub_session_id"] else None,
        "role": row["role"],
        "text": row["text"],
        "created_at": rfc3339(row["created_at"]),
    }


def interaction_view(row: DictRow) -> dict[str, Any]:
    sub_session_id = row["asked_in_sub_session_id"]
    return {
        "tool_call_id": row["tool_call_id"],
        "conversation_id": row["conversation_id"],
        "prompt": row["prompt"],
        "choices": list(row["choices"]),
        "status": row["status"],
        "asked_in_sub_session_id": str(sub_session_id) if sub_session_id else None,
        "answer": row["answer"],
        "answered_at": rfc3339_or_none(row["answered_at"]),
    } | _forms(row)


def _forms(row: DictRow) -> dict[str, Any]:
    """An app's question of forms (``app_ask``) besides: its forms and the answers so far (nothing
    for ``interact.ask``'s, whose view stays as it was)."""
    if row.get("forms") is None:
        return {}
    return {"forms": row["forms"], "answers": row["answers"] or {}}


def task_view(row: DictRow) -> dict[str, Any]:
    """A task of either kind (``service.db.tasks.TASK``): an operation or an interaction, as the MCP
    face shows its state, times and result."""
    return {
        "kind": row["kind"],
        "task_id": str(row["task_id"]),
        "conversation_id": row["conversation_id"],
        "state": row["state"],
        "reason": row["reason"],
        "started_at": rfc3339(row["started_at"]),
        "ends_at": rfc3339_or_none(row["ends_at"]),
        "finalized_at": rfc3339_or_none(row["finalized_at"]),
        "result": row["result"],
    }

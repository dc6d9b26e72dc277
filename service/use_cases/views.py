"""The wire shapes of rows: operations, workspaces."""

from __future__ import annotations

from typing import Any

from psycopg.rows import DictRow

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
        "done": row["state"] != "focusing",
        "result": row["result"],
    }


def operation_brief(row: DictRow) -> dict[str, Any]:
    """The short form carried in close answers."""
    return {"operation_id": str(row["operation_id"]), "state": row["state"], "reason": row["reason"]}

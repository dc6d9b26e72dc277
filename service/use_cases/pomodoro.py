"""The Pomodoro Agent Tools: ``pomodoro.start`` and ``pomodoro.interrupt``.

Both run inside the tool-call transaction opened by ``service.use_cases.tool_calls`` and take the
conversation's workspace lock before anything else.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from uuid import uuid4

from psycopg import AsyncConnection
from psycopg.rows import DictRow

from service.db import operations as ops_db
from service.db import workspaces as ws_db
from service.domain.operations import (
    AGENT_INTERRUPT,
    DEADLINE,
    POMODORO_SCOPE,
    InterruptStatus,
    late_interrupt_status,
)
from service.domain.timefmt import rfc3339
from service.metrics import observe_settled
from service.use_cases.runtime import Runtime
from service.use_cases.tool_call import ToolCall

Answer = tuple[int, dict[str, Any]]


async def start(conn: AsyncConnection[DictRow], rt: Runtime, call: ToolCall) -> Answer:
    await ws_db.lock_or_create(conn, call.conversation_id)
    focusing = await ops_db.focusing_in_conversation(conn, call.conversation_id)
    if focusing is not None:
        if not focusing["overdue"]:
            return 409, {
                "error": "operation_already_focusing",
                "message": "a Pomodoro focus period is already running in this conversation",
                "operation_id": str(focusing["operation_id"]),
            }
        # Its deadline has passed: that fact is settled before the new period opens.
        observe_settled(
            await ops_db.settle_focusing(conn, [focusing["operation_id"]], DEADLINE, only_due=True)
        )
    app = rt.registry.app(POMODORO_SCOPE)
    feature = app.instance_state if app is not None else None
    instance_id, sub_session_id, operation_id = uuid4(), uuid4(), uuid4()
    row = await ops_db.start_pomodoro(
        conn,
        {
            "instance_id": instance_id,
            "sub_session_id": sub_session_id,
            "operation_id": operation_id,
            "conversation_id": call.conversation_id,
            "tool_call_id": call.tool_call_id,
            "duration_seconds": call.arguments["duration_seconds"],
            "activity": call.arguments.get("activity"),
            "schema_version": feature.state_schema_version if feature else 1,
        },
    )
    return 202, {
        "tool_call_id": call.tool_call_id,
        "status": "accepted",
        "operation": {
            "operation_id": str(operation_id),
            "state": row["state"],
            "started_at": rfc3339(row["started_at"]),
            "ends_at": rfc3339(row["ends_at"]),
            "duration_seconds": row["duration_seconds"],
            "activity": row["activity"],
        },
        "instance_id": str(instance_id),
        "sub_session_id": str(sub_session_id),
    }


async def interrupt(conn: AsyncConnection[DictRow], rt: Runtime, call: ToolCall) -> Answer:
    """Bound to the conversation's one focusing Pomodoro; the caller never names a target."""
    window = timedelta(seconds=rt.settings.interrupt_late_window_seconds)
    if await ws_db.lock_existing(conn, call.conversation_id) is not None:
        focusing = await ops_db.focusing_in_conversation(conn, call.conversation_id)
        if focusing is not None:
            settled = await ops_db.settle_focusing(conn, [focusing["operation_id"]], AGENT_INTERRUPT)
            observe_settled(settled)
            if settled and settled[0]["state"] == "interrupted":
                return 200, {
                    "tool_call_id": call.tool_call_id,
                    "status": InterruptStatus.INTERRUPTED.value,
                    "operation_id": str(settled[0]["operation_id"]),
                }
    latest = await ops_db.latest_in_conversation(conn, call.conversation_id)
    if latest is not None:
        status = late_interrupt_status(
            latest["state"], latest["ends_at"], latest["finalized_at"], latest["now"], window
        )
        if status is InterruptStatus.ALREADY_FINAL:
            return 200, {
                "tool_call_id": call.tool_call_id,
                "status": status.value,
                "operation_id": str(latest["operation_id"]),
                "final_state": latest["state"],
            }
    return 200, {
        "tool_call_id": call.tool_call_id,
        "status": InterruptStatus.NO_ACTIVE.value,
    }

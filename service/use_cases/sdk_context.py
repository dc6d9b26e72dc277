"""What a MiniApp sees of its own instance: status, the operation it exists for, the server clock."""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import DictRow

from service.db import operations as operations_db
from service.db import workspaces as ws_db
from service.domain.operations import State
from service.domain.timefmt import rfc3339
from service.use_cases.capabilities import Capability
from service.use_cases.overdue import settle_overdue
from service.use_cases.runtime import Runtime

Conn = AsyncConnection[DictRow]


def operation_view(row: DictRow) -> dict[str, Any]:
    """An operation as a MiniApp's context shows it (the SDK's, and the MCP App's read)."""
    return {
        "operation_id": str(row["operation_id"]),
        "state": row["state"],
        "reason": row["reason"],
        "activity": row["activity"],
        "started_at": rfc3339(row["started_at"]),
        "ends_at": rfc3339(row["ends_at"]),
    }


async def get_context(rt: Runtime, capability: Capability) -> dict[str, Any]:
    async with rt.unit_of_work() as work:
        conn = work.conn
        conversation_id = capability.conversation_id
        latest = await operations_db.latest_for_instance(conn, capability.instance_id, conversation_id)
        operation = (
            None
            if latest is None
            else await operations_db.get_by_id(conn, latest["operation_id"], conversation_id)
        )
        if operation is not None and operation["state"] == State.FOCUSING and operation["overdue"]:
            # The deadline is a fact of the database clock: settled before anything is read.
            await ws_db.lock_existing(conn, conversation_id)
            await settle_overdue(work, conversation_id)
            operation = await operations_db.get_by_id(conn, operation["operation_id"], conversation_id)
        # Read after any settling: the deadline closes the instance in the same transaction.
        instance = await ws_db.instance(conn, capability.instance_id, conversation_id)
        now = (await ws_db.server_time(conn))["now"]
    assert instance is not None
    return {
        "app_scope": capability.app_scope,
        "instance_id": str(capability.instance_id),
        "conversation_id": capability.conversation_id,
        "status": instance["status"],
        "operation": None if operation is None else operation_view(operation),
        "server_time": rfc3339(now),
    }

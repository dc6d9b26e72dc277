"""Tasks, for the MCP face: an operation or an interaction read as a task, by its task id.

A task is read in one statement (``service.db.tasks.TASK``), unless it is a focusing operation past
its deadline: then it is settled first, as every read of an operation does, and read again.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from psycopg.rows import DictRow

from service.db import tasks as tasks_db
from service.db import workspaces as ws_db
from service.domain.timefmt import rfc3339, rfc3339_or_none
from service.use_cases.overdue import settle_overdue
from service.use_cases.runtime import Runtime
from service.use_cases.serializers import task_view
from service.use_cases.unit_of_work import UnitOfWork


async def read_task(rt: Runtime, task_id: UUID, conversation_id: str | None = None) -> dict[str, Any] | None:
    """The task, or None when there is none — or it is of another conversation than the one named."""
    async with rt.unit_of_work(transaction=False) as work:
        row = await tasks_db.task(work.conn, task_id)
    if row is None or conversation_id not in (None, row["conversation_id"]):
        return None
    if row["overdue"]:
        async with rt.unit_of_work() as work:
            await ws_db.lock_existing(work.conn, row["conversation_id"])
            await settle_overdue(work, row["conversation_id"])
            row = await tasks_db.task(work.conn, task_id)
        assert row is not None
    return task_view(row)


async def interaction_task(rt: Runtime, tool_call_id: str, conversation_id: str) -> dict[str, Any] | None:
    """The task of an interaction of the conversation, made on first asking: the same id ever after."""
    async with rt.unit_of_work(transaction=False) as work:
        row = await tasks_db.interaction_task_for(work.conn, tool_call_id, conversation_id)
    return None if row is None else task_view(row)


async def long_call(
    rt: Runtime, conversation_id: str, tool_call_id: str | None = None
) -> dict[str, Any] | None:
    """A long-running call of the conversation — an operation (any app's) or a question
    (``interact.ask``) —: the one named by ``tool_call_id``, else the latest one. A focusing
    operation past its deadline is settled first, as every read of an operation is. None when there
    is none."""

    async def read(work: UnitOfWork) -> DictRow | None:
        if tool_call_id is None:
            return await tasks_db.latest_call(work.conn, conversation_id)
        return await tasks_db.call(work.conn, conversation_id, tool_call_id)

    async with rt.unit_of_work(transaction=False) as work:
        row = await read(work)
    if row is not None and row["overdue"]:
        async with rt.unit_of_work() as work:
            await ws_db.lock_existing(work.conn, conversation_id)
            await settle_overdue(work, conversation_id)
            row = await read(work)
    if row is None:
        return None
    return {
        "operation_id": None if row["operation_id"] is None else str(row["operation_id"]),
        "tool": row["tool"],
        "tool_call_id": row["tool_call_id"],
        "conversation_id": row["conversation_id"],
        "state": row["state"],
        "reason": row["reason"],
        "started_at": rfc3339(row["started_at"]),
        "ends_at": rfc3339_or_none(row["ends_at"]),
        "finalized_at": rfc3339_or_none(row["finalized_at"]),
        "result": row["result"],
    }

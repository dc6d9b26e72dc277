"""What an MCP App's View reads of the operation its token names (``service.mcp.app_tools``): the
row, or the row with the database's clock and whether its deadline has passed. The View's tools
check the row (its app, its conversation, the token) before anything else is done."""

from __future__ import annotations

import uuid

from psycopg.rows import DictRow

from service.db import operations as operations_db
from service.use_cases.runtime import Runtime


async def view_operation(rt: Runtime, operation_id: uuid.UUID, conversation_id: str | None) -> DictRow | None:
    """The operation (read from its conversation's shard on Citus when ``conversation_id`` is given)."""
    async with rt.unit_of_work(transaction=False) as work:
        return await operations_db.get_by_id(work.conn, operation_id, conversation_id)


async def view_operation_with_clock(
    rt: Runtime, operation_id: uuid.UUID, conversation_id: str | None
) -> DictRow | None:
    """The operation with ``server_now`` and ``overdue``, in one statement."""
    async with rt.unit_of_work(transaction=False) as work:
        return await operations_db.get_by_id_with_clock(work.conn, operation_id, conversation_id)

"""Reading an operation; a focusing one that is overdue is settled first."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from service.db import operations as operations_db
from service.db import workspaces as ws_db
from service.domain.errors import not_found
from service.domain.operations import State
from service.use_cases.overdue import settle_overdue
from service.use_cases.runtime import Runtime
from service.use_cases.serializers import operation_view


async def get_operation(rt: Runtime, operation_id: UUID) -> dict[str, Any]:
    """Read on its own (on Citus, the operation is found on whichever shard holds it); only an
    overdue one takes its conversation's lock, in a transaction that names the conversation."""
    async with rt.unit_of_work(transaction=False) as work:
        row = await operations_db.get_by_id(work.conn, operation_id)
    if row is None:
        raise not_found("operation")
    if row["state"] == State.FOCUSING and row["overdue"]:
        # The deadline is a fact of the database clock: settle before answering.
        conversation_id = row["conversation_id"]
        async with rt.unit_of_work() as work:
            await ws_db.lock_existing(work.conn, conversation_id)
            await settle_overdue(work, conversation_id)
            row = await operations_db.get_by_id(work.conn, operation_id, conversation_id)
            assert row is not None
    return operation_view(row)

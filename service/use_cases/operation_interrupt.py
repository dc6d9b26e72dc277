"""The Agent's interrupt of one operation named by its id (an MCP client cancelling its task).

``pomodoro.interrupt`` is bound to the conversation's focusing Pomodoro, whichever it is; a task
cancel names one operation, so it must never end a newer one that started after it. Both end
through the same compare-and-set, ``settle_focusing`` with ``interrupted (agent_interrupt)``, in
one transaction that takes the conversation's workspace lock first. The database clock still
decides: arriving at or after ``ends_at`` settles ``completed``, and an operation already final
is left as it is. Exactly one caller wins; the others read the committed outcome.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import UUID

from service.db import operations as operations_db
from service.db import workspaces as ws_db
from service.domain.errors import not_found
from service.domain.operations import AGENT_INTERRUPT, State
from service.metrics import observe_settled
from service.use_cases.runtime import Runtime
from service.use_cases.serializers import operation_view


@dataclass(frozen=True, slots=True)
class InterruptOutcome:
    interrupted: bool  # this call's compare-and-set ended the operation `interrupted`
    operation: dict[str, Any]  # the operation as GET /v1/operations/{id} shows it, after the call


async def interrupt_operation(rt: Runtime, operation_id: UUID) -> InterruptOutcome:
    async with rt.transaction() as conn:
        row = await operations_db.get_by_id(conn, operation_id)
        if row is None:
            raise not_found("operation")
        interrupted = False
        if row["state"] == State.FOCUSING:
            await ws_db.lock_existing(conn, row["conversation_id"])
            settled = await operations_db.settle_focusing(conn, [operation_id], AGENT_INTERRUPT)
            observe_settled(settled)
            interrupted = any(s["state"] == State.INTERRUPTED for s in settled)
            row = await operations_db.get_by_id(conn, operation_id)
            assert row is not None
        return InterruptOutcome(interrupted, operation_view(row))

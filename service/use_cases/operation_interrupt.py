"""The Agent's interrupt of one operation named by its id (an MCP client cancelling its task).

``pomodoro.interrupt`` is bound to the conversation's focusing Pomodoro, whichever it is; a task
cancel names one operation, so it must never end a newer one that started after it. Both end
through the same compare-and-set, ``settle_focusing_v2`` with ``interrupted (agent_interrupt)``, after
the conversation's workspace lock, in one statement (``operations.INTERRUPT_ONE``: one round trip,
its own transaction). The database clock still decides: arriving at or after ``ends_at`` settles
``completed``, and an operation already final is left as it is. Exactly one caller wins; the
others change nothing. A person's cancel (a person's token on ``/mcp``) ends it as
``interrupted (person_interrupt)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from service.db import operations as operations_db
from service.domain.errors import not_found
from service.domain.operations import AGENT_INTERRUPT, PERSON_INTERRUPT, State
from service.use_cases import callers
from service.use_cases.runtime import Runtime


@dataclass(frozen=True, slots=True)
class InterruptOutcome:
    conversation_id: str
    settled_state: str | None  # what this call's compare-and-set decided; None: it decided nothing

    @property
    def interrupted(self) -> bool:
        return self.settled_state == State.INTERRUPTED


async def interrupt_operation(
    rt: Runtime, operation_id: UUID, *, conversation_id: str | None = None
) -> InterruptOutcome:
    """``conversation_id``: when given, an operation of another conversation is not found."""
    ending = PERSON_INTERRUPT if callers.current.get().is_person else AGENT_INTERRUPT
    async with rt.unit_of_work(transaction=False) as work:
        row = await operations_db.interrupt_one(work.conn, operation_id, conversation_id, ending.reason)
        if row is None:
            raise not_found("operation")
        if row["event_id"] is not None:
            work.observed([row])
    return InterruptOutcome(row["conversation_id"], row["state"])

"""The deadline rule applied by any request that touches a conversation."""

from __future__ import annotations

from service.db import operations as operations_db
from service.use_cases.unit_of_work import UnitOfWork


async def settle_overdue(work: UnitOfWork, conversation_id: str) -> None:
    """Settle the conversation's focusing Pomodoro ``completed`` if its ``ends_at`` has passed.

    The caller holds the conversation's workspace lock.
    """
    work.observed(await operations_db.settle_if_overdue(work.conn, conversation_id))

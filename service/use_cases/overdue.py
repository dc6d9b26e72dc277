"""The deadline rule applied by any request that touches a conversation."""

from __future__ import annotations

from psycopg import AsyncConnection
from psycopg.rows import DictRow

from service.db import operations as operations_db
from service.metrics import observe_settled


async def settle_overdue(conn: AsyncConnection[DictRow], conversation_id: str) -> None:
    """Settle the conversation's focusing Pomodoro ``completed`` if its ``ends_at`` has passed.

    The caller holds the conversation's workspace lock.
    """
    observe_settled(await operations_db.settle_if_overdue(conn, conversation_id))

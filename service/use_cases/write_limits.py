"""Write limits on the Host API: each message, surface event and instance open is counted against
its conversation's allowance and, written with a person's session, that session's too, in the
transaction of the write (``spend_write``). Past an allowance the write is refused with
``429 too_many_requests`` and ``Retry-After``; the refused write and its count roll back together.
The counters live in the database, so every replica spends the same allowance."""

from __future__ import annotations

import math
from uuid import UUID

from psycopg import AsyncConnection
from psycopg.rows import DictRow

from service.db import limits as limits_db
from service.domain.errors import WriteLimited
from service.settings import Settings

MESSAGE = "message"
SURFACE_EVENT = "surface_event"
INSTANCE_OPEN = "instance_open"

# kind -> (the setting of writes per window, what a refusal calls them)
_KINDS = {
    MESSAGE: ("write_limit_messages", "messages"),
    SURFACE_EVENT: ("write_limit_surface_events", "surface events"),
    INSTANCE_OPEN: ("write_limit_instance_opens", "instance opens"),
}


def principals(conversation_id: str, session_id: UUID | None) -> list[str]:
    """The conversation first (the caller holds its workspace lock), then the person's session."""
    names = [f"conversation:{conversation_id}"]
    if session_id is not None:
        names.append(f"session:{session_id}")
    return names


async def spend(
    conn: AsyncConnection[DictRow],
    settings: Settings,
    kind: str,
    conversation_id: str,
    session_id: UUID | None,
    nbytes: int = 0,
) -> None:
    """Count one write, or refuse it (``WriteLimited``: the caller's transaction rolls back)."""
    setting, words = _KINDS[kind]
    window = settings.write_limit_window_seconds
    max_writes: int = getattr(settings, setting)
    max_bytes = settings.write_limit_message_bytes if kind == MESSAGE else 2**62
    retry_in = await limits_db.spend(
        conn,
        principals(conversation_id, session_id),
        kind,
        nbytes,
        window=window,
        max_writes=max_writes,
        max_bytes=max_bytes,
    )
    if retry_in is None:
        return
    allowance = f"{max_writes} {words}" + (f" or {max_bytes} bytes of text" if kind == MESSAGE else "")
    raise WriteLimited(
        f"at most {allowance} per {window} s per conversation and per session; try again later",
        retry_after=max(1, math.ceil(retry_in)),
    )

"""Main-conversation and sub-session messages, kept apart."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from psycopg import errors

from service.db import messages as msg_db
from service.db import workspaces as ws_db
from service.domain.errors import SubSessionEnded, not_found
from service.use_cases import write_limits
from service.use_cases.overdue import settle_overdue
from service.use_cases.runtime import Runtime
from service.use_cases.serializers import message_view


async def post_message(
    rt: Runtime,
    conversation_id: str,
    role: str,
    text: str,
    sub_session_id: UUID | None,
    session_id: UUID | None = None,
) -> dict[str, Any]:
    """Post one message; counted against the conversation's write limits and, for a person's
    session (``session_id``), the session's."""
    try:
        async with rt.unit_of_work() as work:
            conn = work.conn
            await ws_db.lock_or_create(conn, conversation_id)
            work.changed(conversation_id)
            nbytes = len(text.encode("utf-8", "surrogatepass"))
            await write_limits.spend(
                conn, rt.settings, write_limits.MESSAGE, conversation_id, session_id, nbytes
            )
            if sub_session_id is not None:
                await settle_overdue(work, conversation_id)
                sub = await msg_db.sub_session(conn, conversation_id, sub_session_id)
                if sub is None or sub["conversation_id"] != conversation_id:
                    raise not_found("sub_session")
                if sub["status"] != "open":
                    raise SubSessionEnded()
            row = await msg_db.insert(
                conn,
                conversation_id=conversation_id,
                sub_session_id=sub_session_id,
                role=role,
                text=text,
            )
    except errors.CheckViolation as exc:
        # The database's own guard (trigger messages_sub_session_open) caught a race.
        if exc.diag.constraint_name == "sub_session_ended":
            raise SubSessionEnded() from None
        raise
    return message_view(row)


async def list_messages(
    rt: Runtime, conversation_id: str, sub_session_id: UUID | None, limit: int
) -> dict[str, Any]:
    async with rt.unit_of_work() as work:
        conn = work.conn
        if sub_session_id is not None:
            sub = await msg_db.sub_session(conn, conversation_id, sub_session_id)
            if sub is None or sub["conversation_id"] != conversation_id:
                raise not_found("sub_session")
        rows = await msg_db.listing(conn, conversation_id, sub_session_id, limit)
    return {"messages": [message_view(row) for row in rows]}

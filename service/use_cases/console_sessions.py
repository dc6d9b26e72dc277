"""The operator console's sign-ins: a row per sign-in, named by the console's signed cookie
(``service.web.console_cookie``), so that signing out or the expiry ends it on every replica."""

from __future__ import annotations

import uuid
from uuid import UUID

from service.db import console_sessions as console_db
from service.use_cases.runtime import Runtime


async def open_session(rt: Runtime, seconds: int) -> UUID:
    session_id = uuid.uuid4()
    async with rt.unit_of_work() as work:
        conn = work.conn
        await console_db.open_session(conn, session_id, seconds)
    return session_id


async def is_open(rt: Runtime, session_id: UUID) -> bool:
    async with rt.pool.connection() as conn:
        return await console_db.active(conn, session_id)


async def end(rt: Runtime, session_id: UUID) -> None:
    async with rt.pool.connection() as conn:
        await console_db.end(conn, session_id)

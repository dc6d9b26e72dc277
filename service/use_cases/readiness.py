"""Whether this process can serve: the database answers and serves this release."""

from __future__ import annotations

from service.db.ready_check import ReadyCheck
from service.db.schema_revision import schema_problem
from service.use_cases.runtime import Runtime


async def not_ready(rt: Runtime) -> str | None:
    """Why not (an unreachable database, one that did not answer within
    READY_CHECK_TIMEOUT_SECONDS, or a schema that does not serve this release), or None."""
    check = rt.ready_check
    if check is None:
        check = rt.ready_check = ReadyCheck(lambda: _schema(rt), rt.settings.ready_check_timeout_seconds)
    return await check()


async def _schema(rt: Runtime) -> str | None:
    async with rt.pool.connection(timeout=rt.settings.ready_check_timeout_seconds) as conn:
        return await schema_problem(conn)

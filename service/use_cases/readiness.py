"""Whether this process can serve: the database answers and serves this release."""

from __future__ import annotations

from service.db.schema_revision import schema_problem
from service.use_cases.runtime import Runtime


async def not_ready(rt: Runtime) -> str | None:
    """Why not (an unreachable database, or a schema that does not serve this release), or None."""
    try:
        async with rt.pool.connection(timeout=2) as conn:
            return await schema_problem(conn)
    except Exception as exc:
        return str(exc)

"""Which conversation a thing belongs to: what the Host API checks a person's reach against."""

from __future__ import annotations

from uuid import UUID

from service.db import interactions as inter_db
from service.db import workspaces as ws_db
from service.use_cases.runtime import Runtime


async def of_instance(rt: Runtime, instance_id: UUID) -> str | None:
    async with rt.unit_of_work(transaction=False) as work:
        return await ws_db.conversation_of_instance(work.conn, instance_id)


async def of_interaction(rt: Runtime, tool_call_id: str, reach: frozenset[str] | None = None) -> str | None:
    """A conversation (in ``reach``; None: any) holding an interaction asked by ``tool_call_id``:
    the one pending, else the newest. Whether the id names only one is the answer's to check."""
    async with rt.unit_of_work(transaction=False) as work:
        found = await inter_db.conversations_of(
            work.conn, tool_call_id, None if reach is None else sorted(reach)
        )
    return found[0] if found else None

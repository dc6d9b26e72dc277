"""What the service needs to know of a Citus cluster under it (docs/scaling.md): whether its tables
are distributed (``python -m service distribute`` ran), and how many tool calls its workers ran
themselves — the calls the coordinator delegated whole — against those it had to run itself.

On plain PostgreSQL none of this applies: :func:`is_distributed` answers False and nothing else
here is called.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import AsyncConnection
from psycopg.rows import tuple_row

# pg_dist_partition exists only where the citus extension is created.
_CITUS = "SELECT to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL"
_DISTRIBUTED = "SELECT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'workspaces'::regclass)"

#: The function each tool call runs, delegated to the worker holding its conversation.
TOOL_CALL_FUNCTION = "call_tool_v3"

# Calls of the tool-call function each node ran (``track_functions = 'pl'`` on every node): on the
# coordinator those it could not delegate, on a worker those delegated to it.
CALLS_BY_NODE = """
SELECT n.noderole = 'primary' AND n.groupid <> 0 AS worker, r.success, r.result
FROM run_command_on_all_nodes(
    $$SELECT coalesce(sum(calls), 0) FROM pg_stat_user_functions WHERE funcname = '$$
    || %s || $$'$$) r
JOIN pg_dist_node n USING (nodeid)
"""


async def is_distributed(conn: AsyncConnection[Any]) -> bool:
    """True when the database is a Citus coordinator's whose tables are distributed."""
    cursor = conn.cursor(row_factory=tuple_row)
    await cursor.execute(_CITUS)
    row = await cursor.fetchone()
    if not (row and row[0]):
        return False
    await cursor.execute(_DISTRIBUTED)
    row = await cursor.fetchone()
    return bool(row and row[0])


@dataclass(frozen=True, slots=True)
class Calls:
    """Tool calls run since the nodes' statistics were reset: by the workers (delegated) and by
    the coordinator itself (not delegated)."""

    delegated: int
    on_coordinator: int

    def __sub__(self, earlier: Calls) -> Calls:
        return Calls(self.delegated - earlier.delegated, self.on_coordinator - earlier.on_coordinator)

    @property
    def total(self) -> int:
        return self.delegated + self.on_coordinator

    @property
    def delegated_share(self) -> float | None:
        """The share of the calls the workers ran; None with no call."""
        return None if self.total <= 0 else self.delegated / self.total


async def tool_calls_by_node(conn: AsyncConnection[Any]) -> Calls:
    """The tool calls each kind of node ran, read from every node's statistics."""
    cursor = conn.cursor(row_factory=tuple_row)
    await cursor.execute(CALLS_BY_NODE, (TOOL_CALL_FUNCTION,))
    delegated = on_coordinator = 0
    for worker, success, result in await cursor.fetchall():
        if not success:
            raise RuntimeError(f"a node did not answer its statistics: {result}")
        if worker:
            delegated += int(result)
        else:
            on_coordinator += int(result)
    return Calls(delegated, on_coordinator)


#: What Citus says when a node it needed failed during a statement or at its commit (a worker
#: restarting): the request may be sent again, like one whose connection was lost.
_NODE_FAILURES = ("on at least one active node", "connection to the remote node")


def node_failed(error: BaseException) -> bool:
    """A Citus error raised because a node of the cluster was unreachable: not the request's fault,
    not a bug; the caller may send it again (its connection is closed on its way back to the pool)."""
    return isinstance(error, psycopg.errors.InternalError_) and any(
        phrase in str(error) for phrase in _NODE_FAILURES
    )

"""On Citus: how many tool calls the coordinator delegated whole to the worker holding their
conversation, counted where they ran — on the workers — against those the coordinator ran itself
(``service.db.citus.tool_calls_by_node``; each node needs ``track_functions = 'pl'``).

A call that is not delegated still answers correctly, statement by statement from the coordinator,
at a round trip each: nothing fails, only the share below shows it. A share under 1 means a
connection lost its delegation (the pool closes one after any failed statement for that reason,
``service.db.pool.RecoveringPool``), or a call was made in a way Citus does not delegate.
"""

from __future__ import annotations

from prometheus_client import Gauge

from service.background import Periodic
from service.db import citus
from service.db.pool import Pool

INTERVAL_SECONDS = 30.0

DELEGATED_SHARE = Gauge(
    "lineup_citus_tool_calls_delegated_ratio",
    "Of the tool calls the cluster ran since the last look (every 30 s), the share its workers ran "
    "(delegated whole by the coordinator); only on Citus.",
)
CALLS_BY_NODE = Gauge(
    "lineup_citus_tool_calls_run",
    "Tool calls the cluster's nodes ran since their statistics were reset, by kind of node (worker: "
    "delegated; coordinator: not delegated); only on Citus.",
    ["node"],
)


class DelegationWatch(Periodic):
    """A round reads every node's count of tool-call functions run and sets the gauges."""

    name = "citus-delegation"

    def __init__(self, pool: Pool, interval: float = INTERVAL_SECONDS) -> None:
        super().__init__(interval, first_delay=interval)
        self._pool = pool
        self._last: citus.Calls | None = None
        self.share: float | None = None

    async def run_once(self) -> None:
        async with self._pool.connection() as conn:
            calls = await citus.tool_calls_by_node(conn)
        CALLS_BY_NODE.labels("worker").set(calls.delegated)
        CALLS_BY_NODE.labels("coordinator").set(calls.on_coordinator)
        recent = calls if self._last is None else calls - self._last
        self._last = calls
        if recent.total > 0 and recent.delegated >= 0 and recent.on_coordinator >= 0:
            self.share = recent.delegated_share
            DELEGATED_SHARE.set(self.share if self.share is not None else float("nan"))

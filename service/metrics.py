"""Prometheus metrics of the service process (``GET /metrics``)."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

TOOL_CALLS = Counter(
    "lineup_tool_calls_total",
    "Tool calls answered, by tool and outcome (status word or error code).",
    ["tool", "outcome"],
)
TERMINAL_DECISIONS = Counter(
    "lineup_terminal_decisions_total",
    "Operations that reached a terminal state, by state and reason.",
    ["state", "reason"],
)
DEADLINE_LATENESS = Histogram(
    "lineup_deadline_lateness_seconds",
    "finalized_at - ends_at of every deadline decision.",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 60, 300, 3600),
)
SWEEPS = Counter("lineup_sweeper_batches_total", "Sweeper batches that settled at least one row.")


def observe_settled(rows: list[dict[str, object]]) -> None:
    for row in rows:
        TERMINAL_DECISIONS.labels(str(row["state"]), str(row["reason"])).inc()
        lateness = row.get("lateness_ms")
        if isinstance(lateness, int):
            DEADLINE_LATENESS.observe(max(lateness, 0) / 1000)

"""Prometheus metrics of the service process (``GET /metrics``)."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Mapping
from typing import Any, Generic, TypeVar

from prometheus_client import REGISTRY, Counter, Gauge, Histogram
from prometheus_client.registry import Collector

from service.db.pool_metrics import PoolMetrics
from service.logging import Lines
from service.outbox_gauges import OutboxGauges

log = Lines("service.decisions")

M = TypeVar("M", Counter, Histogram)


class Children(Generic[M]):
    """A labelled metric's children, each made once: ``labels()`` takes a lock and builds its key
    on every call, a dictionary lookup here does not. For labels of few values (tools, outcomes,
    states), never for anything a caller chooses freely."""

    def __init__(self, metric: M) -> None:
        self.metric: M = metric
        self._children: dict[tuple[str, ...], M] = {}

    def __call__(self, *values: str) -> M:
        child = self._children.get(values)
        if child is None:
            child = self._children[values] = self.metric.labels(*values)
        return child


class Batched(Collector):
    """What the per-call path counts and times, held in plain dictionaries and added to the metrics
    when the registry is read: ``collect`` — the registry's first collector, so before any of these
    metrics is read — adds them, and gives no metric of its own. A prometheus_client ``inc()`` or
    ``observe()`` takes a lock per value (two for a histogram, after a walk of its buckets in
    Python); here a count is a dictionary update and a duration a bisection of the bounds. The
    children are made when first counted, as ``labels()`` made them, so their ``_created`` time is
    the same. Only the event loop's thread counts here, and ``/metrics`` reads on that thread too."""

    def __init__(self) -> None:
        self._counts: dict[Counter, int] = {}
        # A histogram child -> [its bounds (the last +Inf), the count of each bucket, the sum].
        self._observed: dict[Histogram, tuple[list[float], list[int], list[float]]] = {}

    def count(self, child: Counter) -> None:
        counts = self._counts
        counts[child] = counts.get(child, 0) + 1

    def observe(self, child: Histogram, amount: float) -> None:
        """``child.observe(amount)``, for amounts that are numbers (a NaN would land in no bucket)."""
        pending = self._observed.get(child)
        if pending is None:
            bounds = child._upper_bounds
            pending = self._observed[child] = (bounds, [0] * len(bounds), [0.0])
        bounds, buckets, total = pending
        buckets[bisect_left(bounds, amount)] += 1  # the first bound >= amount, as observe() finds
        total[0] += amount

    def flush(self) -> None:
        counts, self._counts = self._counts, {}
        for counter, count in counts.items():
            counter.inc(count)
        observed, self._observed = self._observed, {}
        for histogram, (_, buckets, total) in observed.items():
            histogram._sum.inc(total[0])
            for bucket, count in zip(histogram._buckets, buckets, strict=True):
                if count:
                    bucket.inc(count)

    def collect(self) -> Iterable[Any]:
        self.flush()
        return ()


BATCHED = Batched()
REGISTRY.register(BATCHED)

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
OUTBOX = OutboxGauges()
# The service's connection pool, while it is open (service.app's lifespan).
POOLS = PoolMetrics()
REGISTRY.register(POOLS)
FOCUSING_OPERATIONS = Gauge("lineup_focusing_operations", "Operations now focusing (sampled).")
SWEEPS = Counter("lineup_sweeper_batches_total", "Sweeper batches that settled at least one row.")
TOOL_CALL_SECONDS = Histogram(
    "lineup_tool_call_seconds",
    "Time to decide (or replay) one validated tool call: from the use case's start to its answer.",
    ["tool"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 6, 15, 30),
)
TOOL_CALLS_BY = Children(TOOL_CALLS)
TOOL_CALL_SECONDS_BY = Children(TOOL_CALL_SECONDS)
TERMINAL_DECISIONS_BY = Children(TERMINAL_DECISIONS)
SERVER_ERRORS = Counter(
    "lineup_http_server_errors_total",
    "HTTP answers with a 5xx status, by API (tools, host, sdk, ops, mcp, probes, web) and status.",
    ["api", "status"],
)
MCP_SESSIONS = Gauge(
    "lineup_mcp_sessions",
    "MCP sessions (handshake-era) open in this process, by kind: agent or person.",
    ["kind"],
)
MCP_SESSIONS_REFUSED = Counter(
    "lineup_mcp_sessions_refused_total",
    "MCP sessions refused, by kind (agent, person) and reason (principal: past the cap of one "
    "person or Agent token, 429; full: past the process's limit for that kind, 503).",
    ["kind", "reason"],
)
DATABASE_REACHABLE = Gauge(
    "lineup_database_reachable",
    "1 when this process's last look at the database succeeded, else 0 (sampled).",
)


def api_of(path: str) -> str:
    """The API a request path belongs to, as the ``api`` label of ``SERVER_ERRORS``."""
    for prefix, api in (("/v1/host/", "host"), ("/v1/sdk/", "sdk"), ("/v1/ops/", "ops"), ("/v1/", "tools")):
        if path.startswith(prefix):
            return api
    if path == "/mcp" or path.startswith("/mcp/"):
        return "mcp"
    return "probes" if path in ("/healthz", "/readyz", "/metrics") else "web"


def count_tool_call(tool: str, outcome: str, seconds: float) -> None:
    """A decided (or replayed) tool call: its count by outcome and its duration (``Batched``)."""
    BATCHED.count(TOOL_CALLS_BY(tool, outcome))
    BATCHED.observe(TOOL_CALL_SECONDS_BY(tool), seconds)


def count_server_error(path: str, status: int) -> None:
    if status >= 500:
        SERVER_ERRORS.labels(api_of(path), str(status)).inc()


def emit_settled(rows: Iterable[Mapping[str, Any]]) -> None:
    """Count and log operations settled by a committed transaction (``UnitOfWork.release``)."""
    for row in rows:
        BATCHED.count(TERMINAL_DECISIONS_BY(str(row["state"]), str(row["reason"])))
        lateness = row.get("lateness_ms")
        if isinstance(lateness, int):
            BATCHED.observe(DEADLINE_LATENESS, max(lateness, 0) / 1000)
        by_call = {"tool_call_id": row["tool_call_id"]} if row.get("tool_call_id") else {}
        log.info(
            "operation_settled",
            **by_call,
            operation_id=str(row["operation_id"]),
            conversation_id=row["conversation_id"],
            state=row["state"],
            reason=row["reason"],
            event_id=str(row["event_id"]),
            lateness_ms=lateness,
        )

"""Probes: the process is up, the database is reachable and migrated, and the metrics."""

from __future__ import annotations

from typing import Any, cast

from litestar import MediaType, Request, Response, get
from litestar.datastructures import State
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from service.api.answers import Health, NotReady, Ready, answer, refusals
from service.db.migrate import head_revision
from service.http import TokenBook, bearer_token, refused
from service.use_cases.readiness import not_ready
from service.use_cases.runtime import Runtime

PROBES = ["Probes"]


@get("/healthz", tags=PROBES, summary="The process is up", response_description="Up")
async def healthz() -> Health:
    return {"status": "ok"}


@get(
    "/readyz",
    tags=PROBES,
    summary="The database is reachable and serves this release (migrated to its head or a later one)",
    response_description="Ready",
    responses={503: answer(NotReady, "Not ready")},
)
async def readyz(state: State) -> Response[Ready]:
    runtime: Runtime = state.runtime
    failure = state.get("loop_failure")
    problem = failure.reason if failure is not None else await not_ready(runtime)
    if problem is not None:
        return _not_ready(problem)
    return Response({"status": "ready", "migration": head_revision()}, status_code=200)


def _not_ready(reason: str) -> Response[Ready]:
    body: NotReady = {"status": "unavailable", "reason": reason}
    return cast(Response[Ready], Response(body, status_code=503))


@get(
    "/metrics",
    tags=PROBES,
    summary="Prometheus metrics (once METRICS_TOKEN is set: that token or OPERATOR_TOKEN)",
    media_type=MediaType.TEXT,
    response_description="Prometheus text exposition format",
    # Optional: open until METRICS_TOKEN is set (or METRICS_PUBLIC=false).
    security=[{}, {"metrics": []}, {"operator": []}],
    responses=refusals(),
)
async def metrics(request: Request[Any, Any, Any], state: State) -> Response[bytes]:
    runtime: Runtime = state.runtime
    if not runtime.settings.metrics_open:
        book: TokenBook = state.tokens
        token = bearer_token(request)
        if token is None or not (book.accepts("metrics", token) or book.accepts("operator", token)):
            raise refused(request, "metrics")
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)


HANDLERS = [healthz, readyz, metrics]

"""Probes: the process is up, the database is reachable and migrated, and the metrics."""

from __future__ import annotations

from typing import cast

from litestar import MediaType, Response, get
from litestar.datastructures import State
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from service.api.answers import Health, NotReady, Ready, answer
from service.db.migrate import head_revision
from service.use_cases.runtime import Runtime

PROBES = ["Probes"]


@get("/healthz", tags=PROBES, summary="The process is up", response_description="Up")
async def healthz() -> Health:
    return {"status": "ok"}


@get(
    "/readyz",
    tags=PROBES,
    summary="The database is reachable and migrated to head",
    response_description="Ready",
    responses={503: answer(NotReady, "Not ready")},
)
async def readyz(state: State) -> Response[Ready]:
    runtime: Runtime = state.runtime
    try:
        async with runtime.pool.connection(timeout=2) as conn:
            cursor = await conn.execute("SELECT version_num FROM alembic_version")
            row = await cursor.fetchone()
    except Exception as exc:
        return _not_ready(str(exc))
    current = row["version_num"] if row else None
    head = head_revision()
    if current != head:
        return _not_ready(f"migrations at {current}, head is {head}")
    return Response({"status": "ready", "migration": str(current)}, status_code=200)


def _not_ready(reason: str) -> Response[Ready]:
    body: NotReady = {"status": "unavailable", "reason": reason}
    return cast(Response[Ready], Response(body, status_code=503))


@get(
    "/metrics",
    tags=PROBES,
    summary="Prometheus metrics",
    media_type=MediaType.TEXT,
    response_description="Prometheus text exposition format",
)
async def metrics() -> Response[bytes]:
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)


HANDLERS = [healthz, readyz, metrics]

"""Probes: the process is up, the database is reachable and migrated, and the metrics."""

from __future__ import annotations

from ipaddress import IPv6Address, ip_address, ip_network
from typing import Any, cast

from litestar import MediaType, Request, Response, get
from litestar.datastructures import State
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from service.api.answers import Health, NotReady, Ready, answer, refusals
from service.db.schema_revision import head_revision
from service.host_names import allowed_host
from service.http import TokenBook, bearer_token, refused
from service.use_cases.readiness import not_ready
from service.use_cases.runtime import Runtime
from service.version import __version__

PROBES = ["Probes"]


@get(
    "/healthz",
    tags=PROBES,
    guards=[allowed_host],
    responses=refusals({421: ["misdirected_request"]}, auth=False),
    summary="The process is up",
    response_description="Up",
)
async def healthz() -> Health:
    return {"status": "ok", "version": __version__}


@get(
    "/readyz",
    tags=PROBES,
    summary="The database is reachable and serves this release (migrated to its head or a later one)",
    response_description="Ready",
    guards=[allowed_host],
    responses={503: answer(NotReady, "Not ready"), **refusals({421: ["misdirected_request"]}, auth=False)},
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
    summary="Prometheus metrics (without a token: private-network peers only until METRICS_TOKEN is set)",
    media_type=MediaType.TEXT,
    response_description="Prometheus text exposition format",
    # Optional for a peer on a private network until METRICS_TOKEN is set (or METRICS_PUBLIC=false).
    security=[{}, {"metrics": []}, {"operator": []}],
    guards=[allowed_host],
    responses=refusals({421: ["misdirected_request"]}),
)
async def metrics(request: Request[Any, Any, Any], state: State) -> Response[bytes]:
    runtime: Runtime = state.runtime
    open_to = runtime.settings.metrics_open
    if not (open_to or (open_to is None and _private_peer(request))):
        book: TokenBook = state.tokens
        token = bearer_token(request)
        if token is None or not (book.accepts("metrics", token) or book.accepts("operator", token)):
            raise refused(request, "metrics")
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)


def _private_peer(request: Request[Any, Any, Any]) -> bool:
    """Whether the request comes from loopback or a private network (RFC 1918, unique-local,
    link-local). The peer is uvicorn's view of it: behind a proxy on loopback, the address its
    X-Forwarded-For names (uvicorn trusts it from FORWARDED_ALLOW_IPS, loopback by default); a
    Unix socket's peer (no address) is local. Anything that is not an address is not private."""
    client = request.scope.get("client")
    if client is None:
        return True
    try:
        address = ip_address(client[0])
    except ValueError:
        return False
    if isinstance(address, IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return any(address in network for network in _PRIVATE_NETWORKS)


# Named rather than ipaddress's is_private, which also counts the documentation ranges.
_PRIVATE_NETWORKS = tuple(
    ip_network(n)
    for n in (
        *("127.0.0.0/8", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16"),
        *("::1/128", "fc00::/7", "fe80::/10"),
    )
)


HANDLERS = [healthz, readyz, metrics]

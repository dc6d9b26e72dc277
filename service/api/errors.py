"""Every error leaves as ``{"error": code, "message": text, ...}``; never a bare 500 for bad input."""

from __future__ import annotations

from typing import Any

import psycopg
import structlog
from litestar import Request, Response
from litestar.exceptions import HTTPException, ValidationException
from litestar.types import Empty
from litestar.utils.scope.state import ScopeState

from service.db import citus
from service.db.reconnect import session_ended
from service.domain.errors import InvalidRequest, Malformed, Refusal, Unavailable, WriteLimited
from service.http import API_HEADERS, error_code, status_of
from service.metrics import count_server_error

log = structlog.get_logger("service.api")


def refusal(request: Request[Any, Any, Any], exc: Refusal) -> Response[dict[str, Any]]:
    headers = dict(API_HEADERS)
    if isinstance(exc, Unavailable | WriteLimited) and exc.retry_after is not None:
        headers["Retry-After"] = str(exc.retry_after)
    status = status_of(exc)
    if status >= 500:
        count_server_error(request.url.path, status)
    return Response(exc.body(), status_code=status, headers=headers)


def validation_failed(request: Request[Any, Any, Any], exc: ValidationException) -> Response[dict[str, Any]]:
    """Litestar's own checks, told with the contract's errors: an empty body is not JSON (400
    malformed_json); anything else it refused has the wrong shape (422 invalid_request)."""
    body = ScopeState.from_scope(request.scope).body
    if body is not Empty and not body:
        return refusal(request, Malformed("the request body is not JSON: it is empty"))
    details = [
        {"path": str(item.get("key") or "$"), "message": str(item.get("message", ""))}
        for item in (exc.extra if isinstance(exc.extra, list) else [])
        if isinstance(item, dict)
    ]
    return refusal(request, InvalidRequest("the request has the wrong shape", details=details))


def http_error(request: Request[Any, Any, Any], exc: HTTPException) -> Response[dict[str, Any]]:
    status = exc.status_code
    if status >= 500:
        count_server_error(request.url.path, status)
    code = error_code(status)
    message = exc.detail if isinstance(exc.detail, str) and exc.detail else code.replace("_", " ")
    return Response(
        {"error": code, "message": message},
        status_code=status,
        headers={**API_HEADERS, **(exc.headers or {})},
    )


def database_unavailable(request: Request[Any, Any, Any], exc: psycopg.Error) -> Response[dict[str, Any]]:
    """A connection lost mid-request (database restart, pg_terminate_backend): nothing committed
    that the caller cannot safely retry; the pool replaces the connection."""
    log.warning("database_unavailable", path=request.url.path, error=str(exc))
    count_server_error(request.url.path, 503)
    return Response(
        {"error": "database_unavailable", "message": "the database connection was lost; retry"},
        status_code=503,
        headers={**API_HEADERS, "Retry-After": "1"},
    )


def internal_database_error(
    request: Request[Any, Any, Any], exc: psycopg.InternalError
) -> Response[dict[str, Any]]:
    """On Citus, a node the request needed failed (a worker restarting), or the server ended a
    transaction left idle past its role's bound (``session_ended``): answered as a lost connection,
    which the caller retries; any other internal error of the database is a 500."""
    if citus.node_failed(exc) or session_ended(exc):
        return database_unavailable(request, exc)
    return unexpected_error(request, exc)


def unexpected_error(request: Request[Any, Any, Any], exc: Exception) -> Response[dict[str, Any]]:
    log.exception("unhandled_error", path=request.url.path, method=request.method, exc_info=exc)
    count_server_error(request.url.path, 500)
    return Response(
        {"error": "internal_error", "message": "the service failed; the request was not applied"},
        status_code=500,
        headers=API_HEADERS,
    )

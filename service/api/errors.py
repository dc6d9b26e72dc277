"""Every error leaves as ``{"error": code, "message": text, ...}``; never a bare 500 for bad input."""

from __future__ import annotations

from typing import Any

import structlog
from litestar import Request, Response
from litestar.exceptions import HTTPException

from service.domain.errors import ApiError

log = structlog.get_logger("service.api")

_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    413: "request_too_large",
    415: "unsupported_media_type",
    422: "invalid_request",
    429: "too_many_requests",
    503: "unavailable",
}


def api_error(_: Request[Any, Any, Any], exc: ApiError) -> Response[dict[str, Any]]:
    return Response(exc.body(), status_code=exc.status)


def http_error(_: Request[Any, Any, Any], exc: HTTPException) -> Response[dict[str, Any]]:
    status = exc.status_code
    code = _CODES.get(status, "error")
    message = exc.detail if isinstance(exc.detail, str) and exc.detail else code.replace("_", " ")
    return Response({"error": code, "message": message}, status_code=status, headers=exc.headers)


def unexpected_error(request: Request[Any, Any, Any], exc: Exception) -> Response[dict[str, Any]]:
    log.exception("unhandled_error", path=request.url.path, method=request.method, exc_info=exc)
    return Response(
        {"error": "internal_error", "message": "the service failed; the request was not applied"},
        status_code=500,
    )

"""Access to the per-process runtime the lifespan put on the application state."""

from __future__ import annotations

from typing import Any

from litestar.connection import ASGIConnection

from service.use_cases.runtime import Runtime


def runtime_of(request: ASGIConnection[Any, Any, Any, Any]) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime

"""``lean_route`` runs a handler in place of Litestar's route only where it can run it as Litestar
would: a handler with anything else (other parameters, dependencies, guards, a plain answer) is
refused when the app is built."""

from __future__ import annotations

from typing import Any

import pytest
from litestar import Litestar, Request, post
from litestar.connection import ASGIConnection
from litestar.di import Provide
from litestar.handlers.base import BaseRouteHandler
from litestar.params import FromQuery, JSONBody

from service.api.lean_route import check_lean_routes, lean_route
from service.api.tools import ToolAnswerResponse


async def _guard(connection: ASGIConnection[Any, Any, Any, Any], handler: BaseRouteHandler) -> None:
    return None


async def _answer() -> int:
    return 1


@post("/fine", middleware=[lean_route])
async def fine(data: JSONBody[dict[str, int]], request: Request[Any, Any, Any]) -> ToolAnswerResponse:
    return ToolAnswerResponse(b"{}", 200)  # pragma: no cover - never called


@post("/other-parameters", middleware=[lean_route])
async def other_parameters(data: JSONBody[dict[str, int]], name: FromQuery[str]) -> ToolAnswerResponse:
    return ToolAnswerResponse(b"{}", 200)  # pragma: no cover - never called


@post("/guarded", middleware=[lean_route], guards=[_guard])
async def guarded(data: JSONBody[dict[str, int]], request: Request[Any, Any, Any]) -> ToolAnswerResponse:
    return ToolAnswerResponse(b"{}", 200)  # pragma: no cover - never called


@post("/depends", middleware=[lean_route], dependencies={"answer": Provide(_answer)})
async def depends(data: JSONBody[dict[str, int]], request: Request[Any, Any, Any]) -> ToolAnswerResponse:
    return ToolAnswerResponse(b"{}", 200)  # pragma: no cover - never called


@post("/plain", middleware=[lean_route])
async def plain(data: JSONBody[dict[str, int]], request: Request[Any, Any, Any]) -> dict[str, int]:
    return {}  # pragma: no cover - never called


def test_a_handler_lean_route_can_run_is_taken() -> None:
    check_lean_routes(Litestar(route_handlers=[fine]))


@pytest.mark.parametrize(
    ("handler", "problem"),
    [
        (other_parameters, "parameters"),
        (guarded, "guards"),
        (depends, "dependencies"),
        (plain, "not an ASGI response"),
    ],
)
def test_a_handler_lean_route_cannot_run_is_refused(handler: Any, problem: str) -> None:
    with pytest.raises(TypeError, match=problem):
        check_lean_routes(Litestar(route_handlers=[handler]))

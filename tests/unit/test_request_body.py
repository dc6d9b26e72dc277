"""The service reads a request body as Litestar does (the same bytes, the same refusals), without
Litestar's async generator of chunks: ``ContractRequest.body`` against ``Request.body``."""

from __future__ import annotations

import asyncio
import functools
from typing import Any

import pytest
from litestar import Litestar, Request, post
from litestar.handlers import HTTPRouteHandler
from litestar.params import JSONBody

from service.api.bodies import ContractRequest

LIMIT = 10


@post("/x", request_max_body_size=LIMIT)
async def _handler(data: JSONBody[dict[str, int]]) -> None:  # pragma: no cover - never called
    return None


@functools.cache
def _route_handler() -> HTTPRouteHandler:
    app = Litestar(route_handlers=[_handler])
    for route in app.routes:
        for handler in getattr(route, "route_handlers", ()):
            if isinstance(handler, HTTPRouteHandler):
                return handler
    raise AssertionError("no handler")


def _read(kind: type[Request[Any, Any, Any]], events: list[dict[str, Any]], length: int | None) -> Any:
    headers = [] if length is None else [(b"content-length", str(length).encode())]
    scope: Any = {
        "type": "http",
        "method": "POST",
        "path": "/x",
        "headers": headers,
        "query_string": b"",
        "route_handler": _route_handler(),
        "state": {},
    }
    queue = list(events)

    async def receive() -> Any:
        return queue.pop(0)

    async def read() -> Any:
        request = kind(scope, receive)
        try:
            first = await request.body()
            again = await request.body()
        except Exception as error:
            return (type(error), str(error))
        assert first == again
        return first

    return asyncio.run(read())


def _body(chunk: bytes, more: bool = False) -> dict[str, Any]:
    return {"type": "http.request", "body": chunk, "more_body": more}


@pytest.mark.parametrize(
    ("events", "length"),
    [
        ([_body(b'{"a": 1}')], 8),
        ([_body(b"")], 0),
        ([_body(b"")], None),
        ([_body(b'{"a"', True), _body(b""), _body(b": 1}")], None),
        ([_body(b"0123456789")], 10),
        ([_body(b"0123456789a")], 11),  # announced over the limit
        ([_body(b"0123456789a")], 3),  # announced under it, received over it
        ([_body(b"012345", True), _body(b"6789ab")], None),  # streamed over it
        ([_body(b"0123", True), {"type": "http.disconnect"}], None),
        ([{"type": "http.disconnect"}], None),
    ],
)
def test_a_body_reads_as_litestar_reads_it(events: list[dict[str, Any]], length: int | None) -> None:
    assert _read(ContractRequest, events, length) == _read(Request, events, length)

"""A route run without Litestar's parameter machinery: for the one route every tool call takes.

``POST /v1/tool-calls`` is declared as any other handler — its body model, answers and refusals are
what Litestar documents, its controller's ``before_request`` checks the credentials, and its function
is what runs — but ``lean_route``, the handler's middleware, runs it in place of Litestar's route
(``HTTPRoute.handle``): the request (the service's ``ContractRequest``), the ``before_request`` hook,
the body read and checked once (``ContractRequest.json``), the handler's function called with
``data`` and ``request``, and the ASGI response it returns. What that skips, per call: the handler's
kwargs model and its extractors, the signature model's conversion of the parameters (a msgspec
``convert`` with its decoder hooks), an ``AsyncExitStack`` for dependencies the route does not have,
and the response's conversion — 70 k instructions per call, 11.3 % of the call's Python on
Litestar's own route (measured at be1932e: 0.551 M with it, 0.621 M without; ``bench/HISTORY.md``).
That is above the 10 % of the Python per call for which this one reach past Litestar's public API
is kept; below it, the route would be Litestar's.

Errors keep their single path: whatever the hook, the body check or the handler raises goes to
Litestar's exception handlers (``service.api.errors``), as from any route. Litestar still routes the
request and owns every other route; a handler given this middleware takes exactly ``data`` (a JSON
body) and ``request``, has no dependencies, guards or response cache, and returns an ASGI response
(checked at start-up by ``check_lean_route``).
"""

from __future__ import annotations

from typing import Any

from litestar import Litestar
from litestar.handlers import HTTPRouteHandler
from litestar.response.base import ASGIResponse
from litestar.types import ASGIApp, Receive, Scope, Send

_PARAMETERS = {"data", "request"}


def lean_route(app: ASGIApp) -> ASGIApp:
    """The handler's middleware (``app``, Litestar's route, runs nothing on this path)."""

    async def run(scope: Scope, receive: Receive, send: Send) -> None:
        handler = scope["route_handler"]
        if not isinstance(handler, HTTPRouteHandler):  # pragma: no cover - set on an HTTP handler
            await app(scope, receive, send)
            return
        request = handler.resolve_request_class()(scope=scope, receive=receive, send=send)
        before = handler.resolve_before_request()
        early = await before(request) if before is not None else None
        if early:  # pragma: no cover - as Litestar: a hook that answers replaces the handler
            response = await handler.to_response(app=scope["litestar_app"], data=early, request=request)
        else:
            response = await handler.fn(data=await request.json(), request=request)
        await response(scope, receive, send)
        if (after := handler.resolve_after_response()) is not None:  # pragma: no cover - none set
            await after(request)

    return run


def check_lean_routes(app: Litestar) -> None:
    """``check_lean_route`` for every handler of ``app`` that has ``lean_route``."""
    for route in app.routes:
        for handler in getattr(route, "route_handlers", ()):
            if isinstance(handler, HTTPRouteHandler) and lean_route in handler.resolve_middleware():
                check_lean_route(handler)


def check_lean_route(handler: HTTPRouteHandler) -> None:
    """Refuse, at start-up, a handler ``lean_route`` cannot run as Litestar would."""
    parameters = set(handler.parsed_fn_signature.parameters)
    problems = [
        problem
        for problem, found in (
            (f"parameters {sorted(parameters)}, not {sorted(_PARAMETERS)}", parameters != _PARAMETERS),
            ("guards", bool(handler.resolve_guards())),
            ("dependencies", bool(handler.resolve_dependencies())),
            ("a response cache", bool(handler.cache)),
            ("a synchronous function", handler.has_sync_callable),
            ("an answer that is not an ASGI response", not _asgi_answer(handler)),
        )
        if found
    ]
    if problems:
        raise TypeError(f"lean_route cannot run {handler.handler_name}: it has {', '.join(problems)}")


def _asgi_answer(handler: HTTPRouteHandler) -> bool:
    annotation: Any = handler.parsed_fn_signature.return_type.annotation
    return isinstance(annotation, type) and issubclass(annotation, ASGIResponse)

"""The demo Agent's HTTP side: ``POST /webhooks/lineup`` takes the relay's deliveries."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import structlog
from litestar import Litestar, Request, Response, get, post
from litestar.datastructures import State

from demo_agent.webhooks import InvalidDeliveryError, SeenEvents, ToolResult, WebhookVerifier, describe

log = structlog.get_logger("demo_agent")
WEBHOOK_PATH = "/webhooks/lineup"

#: What to do with each new result; the default logs it. A fuller Agent would answer the person here.
OnResult = Callable[[ToolResult], Awaitable[None]]


async def log_result(result: ToolResult) -> None:
    log.info("tool_result", **describe(result))


@post(WEBHOOK_PATH)
async def receive(request: Request[Any, Any, Any], state: State) -> Response[Any]:
    verifier: WebhookVerifier = state.verifier
    try:
        result = verifier.verify(await request.body(), dict(request.headers))
    except InvalidDeliveryError as exc:
        log.warning("tool_result_rejected", reason=str(exc), webhook_id=request.headers.get("webhook-id"))
        return Response({"error": "invalid_delivery", "message": str(exc)}, status_code=401)
    seen: SeenEvents = state.seen
    if seen.first_time(result.event_id):
        on_result: OnResult = state.on_result
        await on_result(result)
    else:
        log.info("tool_result_repeat", event_id=result.event_id, tool_call_id=result.tool_call_id)
    return Response(None, status_code=204)


@get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


def create_app(secrets: Sequence[str], on_result: OnResult = log_result) -> Litestar:
    state = State({"verifier": WebhookVerifier(secrets), "seen": SeenEvents(), "on_result": on_result})
    return Litestar(route_handlers=[receive, healthz], state=state, openapi_config=None, logging_config=None)

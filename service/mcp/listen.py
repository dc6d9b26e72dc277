"""Task status pushes at 2026-07-28: ``subscriptions/listen`` with ``notifications.taskIds``.

The tasks extension pushes ``notifications/tasks`` (each a complete ``DetailedTask``, exactly what
``tasks/get`` would answer) on a ``subscriptions/listen`` stream: the listen request's response is
that stream. Here a stream

* acknowledges the task ids it honours — the known ones the request may see (a request naming a
  conversation sees only that conversation's); asking for task ids without declaring the extension
  is ``-32021``; no other kind of notification is honoured (this server's lists never change);
* sends each honoured task as it is now, then each one again once final, woken by the same
  after-commit wake-ups as the Host's event stream (this replica's at once, another replica's
  through its NOTIFY), never by polling a table;
* ends gracefully (the listen result) once every honoured task is final — a person's also when
  their token expires (``exp`` plus the leeway).

Best effort like every push: a dropped stream is not resumed; ``tasks/get`` stays the durable path.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY
from mcp_types import INVALID_PARAMS

from service.mcp import tasks_extension
from service.mcp.binding import bound_conversation, person_ends_at
from service.mcp.push import TASK_STATUS_2026, WireNotification
from service.mcp.tasks import until_final
from service.mcp.tracing import pushed
from service.projection_hub import ProjectionHub
from service.use_cases.runtime import Runtime

Ctx = ServerRequestContext[Any, Any]

#: Task ids one stream may follow.
MAX_TASK_IDS = 100


def _requested_task_ids(params: types.SubscriptionsListenRequestParams) -> list[str]:
    requested = (params.notifications.model_extra or {}).get("taskIds")
    if requested is None:
        return []
    if (
        not isinstance(requested, list)
        or len(requested) > MAX_TASK_IDS
        or not all(isinstance(task_id, str) for task_id in requested)
    ):
        raise MCPError(
            INVALID_PARAMS, f"notifications.taskIds must be a list of at most {MAX_TASK_IDS} task ids"
        )
    return list(dict.fromkeys(requested))


class TaskListen:
    """The ``subscriptions/listen`` handler (registered for 2026-07-28 requests)."""

    def __init__(self, rt: Runtime, hub: ProjectionHub) -> None:
        self._rt = rt
        self._hub = hub

    async def __call__(
        self, ctx: Ctx, params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        task_ids = _requested_task_ids(params)
        if task_ids and not tasks_extension.declares(ctx):
            raise tasks_extension.missing_capability()
        conversation_id = bound_conversation((ctx.params or {}).get("_meta"))
        honoured: dict[str, dict[str, Any]] = {}
        for task_id in task_ids:
            try:
                honoured[task_id] = await tasks_extension.read(self._rt, task_id, conversation_id)
            except MCPError:
                continue  # unknown (or not this conversation's): simply not honoured
        meta: dict[str, Any] = {SUBSCRIPTION_ID_META_KEY: ctx.request_id}
        acknowledged = types.SubscriptionFilter.model_validate({"taskIds": list(honoured)})
        await ctx.session.send_notification(
            types.SubscriptionsAcknowledgedNotification(
                params=types.SubscriptionsAcknowledgedNotificationParams(
                    notifications=acknowledged, _meta=meta
                )
            ),
            related_request_id=ctx.request_id,
        )

        async def send(task: dict[str, Any]) -> None:
            notification: Any = WireNotification(
                TASK_STATUS_2026, {**tasks_extension.detailed(task, self._rt.registry), "_meta": meta}
            )
            await ctx.session.send_notification(notification, related_request_id=ctx.request_id)

        async def follow(task_id: str, task: dict[str, Any]) -> None:
            await send(task)
            final = await until_final(
                self._hub, lambda: tasks_extension.read(self._rt, task_id, conversation_id), task
            )
            if final is not task:
                with pushed(TASK_STATUS_2026, final):  # the ending, under this listen's span
                    await send(final)

        following = asyncio.gather(*(follow(task_id, task) for task_id, task in honoured.items()))
        ends_at = person_ends_at.get()
        if ends_at is None:
            await following
        else:  # a person's stream ends (gracefully) when their token expires
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(ends_at - time.time(), 0.0)):
                    await following
        return types.SubscriptionsListenResult(_meta=meta)

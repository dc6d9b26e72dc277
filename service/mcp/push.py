"""Pushes to an MCP session: ``notifications/tasks/status`` when an operation it started settles.

Each operation a session starts is watched until it is final, woken by the same after-commit
wake-ups as the Host's event stream (``ProjectionHub``), never by polling a table; the final task
is then sent on the session's standalone stream (its open ``GET``). Best effort by nature — a
client with no stream open, or one whose session ended, misses it — so ``tasks/get`` and the
relay's webhooks stay the durable paths.
"""

from __future__ import annotations

import asyncio
from typing import Any

import structlog
from mcp.server.session import ServerSession

from service.mcp.tasks import settled, task_view
from service.mcp.tracing import pushed
from service.projection_hub import ProjectionHub
from service.use_cases.runtime import Runtime

log = structlog.get_logger("service.mcp")

#: Watches at once in one process; past this a start is simply not pushed (tasks/get still is).
MAX_WATCHES = 10_000


TASK_STATUS = "notifications/tasks/status"
#: The tasks extension's notification at 2026-07-28 (sent on ``subscriptions/listen`` streams).
TASK_STATUS_2026 = "notifications/tasks"


class WireNotification:
    """A notification sent exactly as given. ``TaskStatusNotification`` is not in the SDK's
    notification union (its tasks are types-only), and dumping that model would drop the Task's
    required ``ttl: null``."""

    def __init__(self, method: str, params: dict[str, Any]) -> None:
        self.method = method
        self.params = params

    def model_dump(self, **_: Any) -> dict[str, Any]:
        return {"method": self.method, "params": self.params}


class Pushes:
    def __init__(self, rt: Runtime, hub: ProjectionHub) -> None:
        self._rt = rt
        self._hub = hub
        self._watches: set[asyncio.Task[None]] = set()

    def watch(self, session: ServerSession, operation: dict[str, Any], *, fresh: bool) -> None:
        """``operation``: as the start answered it, with its ``conversation_id``; ``fresh`` when
        that answer was decided just now (a replayed one may be long over: it is read first)."""
        operation_id = str(operation["operation_id"])
        if len(self._watches) >= MAX_WATCHES:
            log.warning("mcp_push_skipped", operation_id=operation_id, watches=len(self._watches))
            return
        watch = asyncio.create_task(self._push_when_settled(session, operation, fresh), name="mcp-push")
        self._watches.add(watch)
        watch.add_done_callback(self._watches.discard)

    async def _push_when_settled(self, session: ServerSession, started: dict[str, Any], fresh: bool) -> None:
        operation_id = str(started["operation_id"])
        try:
            # Subscribed at once: no read until a wake-up of the conversation or the deadline.
            operation = await settled(self._rt, self._hub, operation_id, known=started if fresh else None)
            notification: Any = WireNotification(TASK_STATUS, task_view(operation))
            with pushed(TASK_STATUS, operation):  # under the tools/call span that started the watch
                await session.send_notification(notification)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a push is advisory: never let it take anything down
            log.warning("mcp_push_failed", operation_id=operation_id, error=str(exc))

    async def close(self) -> None:
        for watch in list(self._watches):
            watch.cancel()
        await asyncio.gather(*self._watches, return_exceptions=True)

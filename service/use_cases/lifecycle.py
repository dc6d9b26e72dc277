"""The workspace: what is in the foreground, switching it, closing instances.

What leaving an app does is the app's to say (its manifest's ``lifecycle``): leaving one whose
``on_leave`` is ``interrupt`` (Pomodoro) for Interact or another app interrupts its focusing
operation; closing an instance cancels its operation — both through the same compare-and-set as
the deadline and the Agent's interrupt. An app ``opened_by`` its ``tools`` cannot be opened by
bringing it to the foreground.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from psycopg import AsyncConnection
from psycopg.rows import DictRow

from service.app_manifest import AppManifest
from service.db import instances as inst_db
from service.db import interactions as inter_db
from service.db import operations as operations_db
from service.db import workspaces as ws_db
from service.domain.errors import AppNotResumable, UnknownApp, not_found
from service.domain.operations import APP_CLOSED, USER_LEFT
from service.domain.timefmt import rfc3339
from service.use_cases import write_limits
from service.use_cases.overdue import settle_overdue
from service.use_cases.runtime import Runtime
from service.use_cases.serializers import interaction_view, operation_brief, operation_view

Conn = AsyncConnection[DictRow]
INTERACT = "interact"


async def _workspace(conn: Conn, conversation_id: str) -> dict[str, Any]:
    row = await ws_db.get(conn, conversation_id)
    now = (await ws_db.server_time(conn))["now"]
    if row is None:
        return {
            "conversation_id": conversation_id,
            "foreground": INTERACT,
            "instances": [],
            "focusing_operation": None,
            "pending_interactions": [],
            "server_time": rfc3339(now),
        }
    instances = await ws_db.instances(conn, conversation_id)
    foreground: str | dict[str, str] = INTERACT
    for instance in instances:
        if instance["instance_id"] == row["foreground_instance_id"]:
            foreground = {"app_scope": instance["app_scope"], "instance_id": str(instance["instance_id"])}
    focusing = await operations_db.focusing_in_conversation(conn, conversation_id)
    focusing_view = None
    if focusing:
        op = await operations_db.get_by_id(conn, focusing[0]["operation_id"], conversation_id)
        assert op is not None
        focusing_view = operation_view(op)
    return {
        "conversation_id": conversation_id,
        "foreground": foreground,
        "instances": [
            {
                "instance_id": str(i["instance_id"]),
                "app_scope": i["app_scope"],
                "status": i["status"],
                "sub_session_id": str(i["sub_session_id"]) if i["sub_session_id"] else None,
            }
            for i in instances
        ],
        "focusing_operation": focusing_view,
        "pending_interactions": [
            interaction_view(row) for row in await inter_db.pending(conn, conversation_id)
        ],
        "server_time": rfc3339(now),
    }


async def get_workspace(rt: Runtime, conversation_id: str) -> dict[str, Any]:
    async with rt.unit_of_work() as work:
        conn = work.conn
        focusing = await operations_db.focusing_in_conversation(conn, conversation_id)
        if any(row["overdue"] for row in focusing):
            await ws_db.lock_existing(conn, conversation_id)
            await settle_overdue(work, conversation_id)
        return await _workspace(conn, conversation_id)


async def switch_foreground(
    rt: Runtime, conversation_id: str, target_scope: str, session_id: UUID | None = None
) -> dict[str, Any]:
    """Bring Interact (``target_scope == "interact"``) or an app to the foreground; an instance it
    opens counts against the write limits (``session_id``: a person's session)."""
    app = rt.registry.app(target_scope)
    if app is None:
        raise UnknownApp(f"no app with scope {target_scope!r}")
    async with rt.unit_of_work() as work:
        conn = work.conn
        await ws_db.lock_or_create(conn, conversation_id)
        work.changed(conversation_id)
        await settle_overdue(work, conversation_id)
        target: UUID | None = None
        if app.surface_kind != "builtin":
            existing = await ws_db.open_instance_of_scope(conn, conversation_id, target_scope)
            if existing is not None:
                target = existing["instance_id"]
            elif app.lifecycle.opened_by == "tools":
                raise AppNotResumable(f"{app.name} opens only through {_openers(rt, app)}")
        leaving = [
            row["operation_id"]
            for row in await operations_db.focusing_in_conversation(conn, conversation_id)
            if row["app_scope"] != target_scope and _ends_on_leave(rt, row["app_scope"])
        ]
        if leaving:
            # Leaving an app that says so interrupts its operation (completed if its deadline passed).
            work.observed(await operations_db.settle_focusing(conn, conversation_id, leaving, USER_LEFT))
        if app.surface_kind != "builtin" and target is None:
            await write_limits.spend(
                conn, rt.settings, write_limits.INSTANCE_OPEN, conversation_id, session_id
            )
            feature = app.instance_state
            opened = await inst_db.open_app(
                conn,
                conversation_id=conversation_id,
                app_scope=target_scope,
                schema_version=feature.state_schema_version if feature else None,
            )
            target = opened["instance_id"]
        await ws_db.set_foreground(conn, conversation_id, target)
        return await _workspace(conn, conversation_id)


def _ends_on_leave(rt: Runtime, app_scope: str) -> bool:
    app = rt.registry.app(app_scope)
    return app is not None and app.lifecycle.on_leave == "interrupt"


def _openers(rt: Runtime, app: AppManifest) -> str:
    """The Tools that open an instance of ``app``: ``the pomodoro.start tool``."""
    names = [t.name for t in app.tools if t.name in rt.registry.runners and rt.registry.runner(t.name).opens]
    return f"the {' or '.join(names)} tool" if names else "its tools"


async def conversation_of(rt: Runtime, instance_id: UUID) -> str:
    """The instance's conversation (it never changes), read before the transaction that changes it,
    so that every statement of that transaction names the conversation; 404 when none."""
    async with rt.unit_of_work(transaction=False) as work:
        conversation_id = await ws_db.conversation_of_instance(work.conn, instance_id)
    if conversation_id is None:
        raise not_found("instance")
    return conversation_id


async def close_instance(
    rt: Runtime, instance_id: UUID, conversation_id: str | None = None
) -> dict[str, Any]:
    """AppLifecycleManager.close: cancels a focusing operation, never rewrites a final one.
    ``conversation_id``: the instance's, when the caller knows it."""
    if conversation_id is None:
        conversation_id = await conversation_of(rt, instance_id)
    async with rt.unit_of_work() as work:
        conn = work.conn
        if not await ws_db.lock_existing(conn, conversation_id):
            raise not_found("instance")
        instance = await ws_db.instance(conn, instance_id, conversation_id)
        if instance is None:
            raise not_found("instance")
        work.changed(conversation_id)
        focusing = await operations_db.focusing_for_instance(conn, instance_id, conversation_id)
        if focusing is not None:
            work.observed(
                await operations_db.settle_focusing(
                    conn, conversation_id, [focusing["operation_id"]], APP_CLOSED
                )
            )
        app = rt.registry.app(instance["app_scope"])
        feature = app.instance_state if app else None
        await inst_db.close_instance(
            conn,
            conversation_id,
            instance_id,
            delete_state=feature is not None and feature.retention == "delete_on_close",
        )
        operation = await operations_db.latest_for_instance(conn, instance_id, conversation_id)
        return {
            "instance_id": str(instance_id),
            "app_scope": instance["app_scope"],
            "status": "closed",
            "operation": operation_brief(operation) if operation is not None else None,
        }


SURFACE_EVENTS = ("dimmed", "undimmed", "locked", "unlocked", "reloaded")


async def record_surface_event(
    rt: Runtime, instance_id: UUID, event: str, session_id: UUID | None = None
) -> dict[str, Any]:
    """Dimming, locking and reloading are recorded and never interrupt anything; each counts
    against the instance's conversation's write limits (and the person's session's)."""
    conversation_id = await conversation_of(rt, instance_id)
    async with rt.unit_of_work() as work:
        conn = work.conn
        await write_limits.spend(
            conn, rt.settings, write_limits.SURFACE_EVENT, conversation_id, session_id, len(event)
        )
        await inst_db.record_surface_event(conn, conversation_id, instance_id, event)
    return {"interrupted": False}

"""Random sequences against the real service, checking the workspace invariants after every step.

The machine drives one conversation per example through the HTTP APIs (start, interrupt, leave,
switch app, resume, close, surface events, snapshot writes, messages), lets time pass beyond
``ends_at``, runs the sweeper's own statements and restarts the service; after every step it reads
the database and checks what must always hold.
"""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from litestar.testing import TestClient
from psycopg.rows import dict_row

from harness.calls import expire, interrupt_body, start_body
from service.app import create_app
from service.db import operations as operations_sql
from service.manifests import Registry
from service.settings import Settings
from tests.conftest import AGENT, HOST

SURFACE_EVENTS = ["dimmed", "undimmed", "locked", "unlocked", "reloaded"]


class Service:
    """The service in-process; ``restart`` stops it (lifespan shutdown) and starts a new one."""

    def __init__(self, settings: Settings, registry: Registry) -> None:
        self._settings = settings
        self._registry = registry
        self.client = self._start()

    def _start(self) -> TestClient[Any]:
        client: TestClient[Any] = TestClient(create_app(self._settings, self._registry, sweeper=False))
        client.__enter__()
        return client

    def restart(self) -> None:
        self.client.__exit__(None, None, None)
        self.client = self._start()

    def close(self) -> None:
        self.client.__exit__(None, None, None)


def build_machine(service: Service, db: psycopg.Connection[dict[str, Any]]) -> type[RuleBasedStateMachine]:
    class WorkspaceMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.cid = f"sm-{uuid.uuid4()}"
            self.final_states: dict[str, tuple[str, str]] = {}
            self.frozen_snapshots: dict[str, tuple[int, Any]] = {}
            self.ended_sub_sessions: dict[str, int] = {}
            self.capabilities: dict[str, str] = {}

        # -- helpers ---------------------------------------------------------------------------
        @property
        def http(self) -> TestClient[Any]:
            return service.client

        def instances(self) -> list[dict[str, Any]]:
            return list(
                db.execute(
                    "SELECT i.instance_id::text AS instance_id, i.app_scope, i.status, s.sub_session_id::text AS sub"
                    " FROM app_instances i JOIN sub_sessions s USING (instance_id)"
                    " WHERE i.conversation_id = %s ORDER BY i.opened_at",
                    [self.cid],
                ).fetchall()
            )

        def focusing(self) -> dict[str, Any] | None:
            return db.execute(
                "SELECT operation_id::text AS operation_id FROM operations"
                " WHERE conversation_id = %s AND state = 'focusing'",
                [self.cid],
            ).fetchone()

        # -- rules -------------------------------------------------------------------------------
        @rule(duration=st.integers(min_value=1, max_value=3600), activity=st.none() | st.text(max_size=20))
        def start(self, duration: int, activity: str | None) -> None:
            activity = activity.replace("\x00", "") if activity else activity
            response = self.http.post(
                "/v1/tool-calls",
                json=start_body(self.cid, duration_seconds=duration, activity=activity),
                headers=AGENT,
            )
            assert response.status_code in (202, 409), response.text
            if response.status_code == 409:
                assert response.json()["error"] == "operation_already_focusing"

        @rule()
        def interrupt(self) -> None:
            response = self.http.post("/v1/tool-calls", json=interrupt_body(self.cid), headers=AGENT)
            assert response.status_code == 200, response.text
            assert response.json()["status"] in (
                "interrupted",
                "operation_already_final",
                "no_active_focusing_operation",
            )

        @rule(app=st.sampled_from(["interact", "whiteboard", "pomodoro"]))
        def switch_foreground(self, app: str) -> None:
            body = {"target": "interact" if app == "interact" else {"app_scope": app}}
            response = self.http.post(
                f"/v1/host/conversations/{self.cid}/workspace/foreground", json=body, headers=HOST
            )
            assert response.status_code in (200, 409), response.text
            if response.status_code == 409:
                assert app == "pomodoro"
                assert response.json()["error"] == "app_not_resumable"

        @precondition(lambda self: bool(self.instances()))
        @rule(data=st.data())
        def close(self, data: st.DataObject) -> None:
            instance = data.draw(st.sampled_from(self.instances()))
            first = self.http.post(f"/v1/host/instances/{instance['instance_id']}/close", headers=HOST)
            assert first.status_code == 200, first.text
            assert first.json()["status"] == "closed"

        @precondition(lambda self: bool(self.instances()))
        @rule(data=st.data(), event=st.sampled_from(SURFACE_EVENTS))
        def surface_event(self, data: st.DataObject, event: str) -> None:
            instance = data.draw(st.sampled_from(self.instances()))
            before = self.focusing()
            response = self.http.post(
                f"/v1/host/instances/{instance['instance_id']}/surface-events",
                json={"event": event},
                headers=HOST,
            )
            assert response.json() == {"interrupted": False}
            assert self.focusing() == before

        @precondition(lambda self: bool(self.instances()))
        @rule(data=st.data(), activity=st.text(max_size=30))
        def write_snapshot(self, data: st.DataObject, activity: str) -> None:
            instance = data.draw(st.sampled_from(self.instances()))
            iid = instance["instance_id"]
            if iid not in self.capabilities:
                minted = self.http.post(f"/v1/host/instances/{iid}/capability", headers=HOST)
                assert minted.status_code == 200, minted.text
                self.capabilities[iid] = minted.json()["capability"]
            sdk = {"Authorization": f"Bearer {self.capabilities[iid]}"}
            current = self.http.get("/v1/sdk/state", headers=sdk).json()
            payload: dict[str, Any] = (
                {"activity": activity.replace("\x00", "")}
                if instance["app_scope"] == "pomodoro"
                else {"strokes": []}
            )
            response = self.http.put(
                "/v1/sdk/state", json={"expected_revision": current["revision"], "data": payload}, headers=sdk
            )
            if instance["status"] == "closed" or current["readonly"]:
                assert response.status_code == 409, response.text
                assert response.json()["error"] == "state_readonly"
            else:
                assert response.status_code in (200, 409), response.text

        @precondition(lambda self: bool(self.instances()))
        @rule(data=st.data())
        def message_in_sub_session(self, data: st.DataObject) -> None:
            instance = data.draw(st.sampled_from(self.instances()))
            response = self.http.post(
                f"/v1/host/conversations/{self.cid}/messages",
                json={"role": "user", "text": "hello", "sub_session_id": instance["sub"]},
                headers=HOST,
            )
            assert response.status_code in (201, 409), response.text

        @precondition(lambda self: self.focusing() is not None)
        @rule()
        def time_passes_beyond_ends_at(self) -> None:
            focusing = self.focusing()
            assert focusing is not None
            expire(db, focusing["operation_id"])

        @rule()
        def sweeper_runs(self) -> None:
            db.execute(operations_sql.SETTLE_DUE, {"limit": 50}).fetchall()

        @rule()
        def service_restarts(self) -> None:
            service.restart()

        # -- invariants ----------------------------------------------------------------------------
        @invariant()
        def at_most_one_focusing_operation(self) -> None:
            row = db.execute(
                "SELECT count(*) AS n FROM operations WHERE conversation_id = %s AND state = 'focusing'",
                [self.cid],
            ).fetchone()
            assert row is not None
            count = row["n"]
            assert count <= 1

        @invariant()
        def terminal_states_never_change_and_each_has_one_result(self) -> None:
            rows = db.execute(
                "SELECT o.operation_id::text AS id, o.state, o.reason, count(x.event_id) AS results"
                " FROM operations o LEFT JOIN outbox x"
                " ON x.tool_call_id = o.tool_call_id AND x.conversation_id = o.conversation_id"
                " WHERE o.conversation_id = %s GROUP BY o.operation_id, o.conversation_id",
                [self.cid],
            ).fetchall()
            for row in rows:
                if row["state"] == "focusing":
                    assert row["results"] == 0
                    assert row["id"] not in self.final_states
                    continue
                assert row["results"] == 1
                seen = self.final_states.setdefault(row["id"], (row["state"], row["reason"]))
                assert seen == (row["state"], row["reason"])

        @invariant()
        def a_closed_snapshot_never_changes(self) -> None:
            rows = db.execute(
                "SELECT s.instance_id::text AS id, s.revision, s.data, s.readonly, i.status FROM instance_states s"
                " JOIN app_instances i USING (instance_id) WHERE i.conversation_id = %s",
                [self.cid],
            ).fetchall()
            for row in rows:
                if row["status"] == "closed":
                    assert row["readonly"]
                    seen = self.frozen_snapshots.setdefault(row["id"], (row["revision"], row["data"]))
                    assert seen == (row["revision"], row["data"])

        @invariant()
        def an_ended_sub_session_never_grows(self) -> None:
            rows = db.execute(
                "SELECT s.sub_session_id::text AS id, s.status, count(m.message_id) AS n FROM sub_sessions s"
                " LEFT JOIN messages m USING (sub_session_id) WHERE s.conversation_id = %s"
                " GROUP BY s.sub_session_id, s.status",
                [self.cid],
            ).fetchall()
            for row in rows:
                if row["status"] == "ended":
                    seen = self.ended_sub_sessions.setdefault(row["id"], row["n"])
                    assert seen == row["n"]

        @invariant()
        def the_foreground_is_consistent_with_the_open_instances(self) -> None:
            workspace = db.execute(
                "SELECT foreground_instance_id::text AS fg FROM workspaces WHERE conversation_id = %s",
                [self.cid],
            ).fetchone()
            instances = {i["instance_id"]: i for i in self.instances()}
            if workspace is not None and workspace["fg"] is not None:
                assert instances[workspace["fg"]]["status"] == "open"
            open_pomodoros = [
                i for i in instances.values() if i["app_scope"] == "pomodoro" and i["status"] == "open"
            ]
            focusing = self.focusing()
            assert len(open_pomodoros) == (1 if focusing else 0)
            if workspace is not None and focusing is not None:
                # A focusing Pomodoro is always the foreground: leaving it would have ended it.
                assert workspace["fg"] == open_pomodoros[0]["instance_id"]
            subs_open = {i["instance_id"]: i for i in instances.values()}
            for instance in subs_open.values():
                sub_session = db.execute(
                    "SELECT status FROM sub_sessions WHERE instance_id = %s", [instance["instance_id"]]
                ).fetchone()
                assert sub_session is not None
                assert (sub_session["status"] == "open") == (instance["status"] == "open")

    return WorkspaceMachine


def test_random_workspace_sequences_keep_every_invariant(
    settings: Settings, registry: Registry, database_url: str
) -> None:
    service = Service(settings, registry)
    try:
        with psycopg.connect(database_url, autocommit=True, row_factory=dict_row) as db:
            machine = build_machine(service, db)
            run_state_machine_as_test(
                machine,
                settings=settings_for_machine(),
            )
    finally:
        service.close()


def settings_for_machine() -> settings:
    return settings(
        max_examples=40,
        stateful_step_count=25,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )

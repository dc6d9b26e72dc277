"""Migration 0019: the answers recorded before it (a status, no outcome word) get the word their
answer names, and replay byte for byte with the status they were recorded with."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from alembic import command
from psycopg.rows import dict_row

from harness.database import DatabaseFactory, with_database
from service.db import migrate
from service.http import status_of_kind
from service.manifests import Registry, registry_of
from service.settings import Settings

# Answers as the release before recorded them: (tool_call_id, tool, status_code, response text).
RECORDED = (
    ("old-start", "pomodoro.start", 202, '{"status":"accepted","operation":{"operation_id":"x"}}'),
    ("old-stop", "pomodoro.interrupt", 200, '{"status":"no_active_focusing_operation","zeta":1,"alpha":2}'),
    ("old-busy", "pomodoro.start", 409, '{"error":"operation_already_focusing","message":"busy"}'),
    ("old-gone", "pomodoro.start", 410, '{"error":"tool_call_expired"}'),
)
CALL = "SELECT * FROM call_tool_v3(%s, 'conv-old', %s, 'fp', '{}', %s, '{\"late_window_seconds\": 300}')"
DECIDE = {"pomodoro.start": "pomodoro_start", "pomodoro.interrupt": "pomodoro_interrupt"}


@pytest.fixture
def at_0018(database_factory: DatabaseFactory) -> Iterator[str]:
    name = database_factory.create_empty()
    url = with_database(database_factory.server, name)
    try:
        command.upgrade(migrate.alembic_config(url), "0018")
        yield url
    finally:
        database_factory.drop(name)


def test_answers_recorded_before_0019_replay_byte_for_byte_with_their_status(
    at_0018: str, registry: Registry
) -> None:
    with psycopg.connect(at_0018, autocommit=True, row_factory=dict_row) as conn:
        db: Any = conn  # rows as the tests read them
        for tool_call_id, tool, status, response in RECORDED:
            db.execute(
                "INSERT INTO tool_calls (tool_call_id, conversation_id, tool, fingerprint, status_code, response)"
                " VALUES (%s, 'conv-old', %s, 'fp', %s, %s)",
                (tool_call_id, tool, status, response),
            )
        migrate.upgrade(at_0018, registry_of(Settings()))
        recorded = {
            row["tool_call_id"]: row["outcome"]
            for row in db.execute("SELECT tool_call_id, outcome FROM tool_calls").fetchall()
        }
        assert recorded == {
            "old-start": "accepted",
            "old-stop": "no_active_focusing_operation",
            "old-busy": "operation_already_focusing",
            "old-gone": "tool_call_expired",
        }
        for tool_call_id, tool, status, response in RECORDED:
            again = db.execute(CALL, (tool_call_id, tool, DECIDE[tool])).fetchone()
            assert again["replayed"] is True
            assert status_of_kind(registry.kind_of(again["outcome"])) == status
            if again["outcome"] != "tool_call_expired":
                assert again["response"] == response
            else:
                assert json.loads(again["response"])["error"] == "tool_call_expired"
        assert db.execute("SELECT count(*) AS n FROM operations").fetchone()["n"] == 0

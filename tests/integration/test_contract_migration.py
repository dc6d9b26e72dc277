"""Migration 0023, the contract step after 0.4.0: a database as 0.4.0 left it — its compatibility
functions, one depending on another, and answers recorded with their HTTP status — migrates to this
release: what only the releases before 0.4.0 needed is gone, and every answer replays byte for byte."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from alembic import command
from psycopg.rows import dict_row

from harness.database import DatabaseFactory, with_database
from service.db import migrate
from service.manifests import registry_of
from service.settings import Settings

# Two of 0.4.0's compatibility functions as its 99_compat.sql made them: the second's body (a
# SQL-standard one) names the first, so Postgres refuses to drop the first while the second exists.
PREVIOUS_CODE = (
    """
CREATE FUNCTION interface_1_statuses() RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN '{"accepted": 202, "interrupted": 200, "tool_call_expired": 410}'::jsonb
""",
    """
CREATE FUNCTION compat_status_code(p_outcome text, p_context jsonb) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN coalesce((p_context -> 'statuses' ->> p_outcome)::integer,
                (interface_1_statuses() ->> p_outcome)::integer)
""",
)
ANSWER = '{"status":"accepted","zeta":1,"alpha":2}'


@pytest.fixture
def at_0022(database_factory: DatabaseFactory) -> Iterator[str]:
    name = database_factory.create_empty()
    url = with_database(database_factory.server, name)
    try:
        command.upgrade(migrate.alembic_config(url), "0022")
        yield url
    finally:
        database_factory.drop(name)


def test_a_database_of_0_4_0_contracts_and_its_answers_replay_byte_for_byte(at_0022: str) -> None:
    with psycopg.connect(at_0022, autocommit=True, row_factory=dict_row) as conn:
        db: Any = conn
        for statement in PREVIOUS_CODE:
            db.execute(statement)
        db.execute(
            "INSERT INTO tool_calls (tool_call_id, conversation_id, tool, fingerprint, status_code, outcome,"
            " response) VALUES ('old-start', 'conv-old', 'pomodoro.start', 'fp', 202, 'accepted', %s)",
            (ANSWER,),
        )
        migrate.upgrade(at_0022, registry_of(Settings()))
        assert db.execute("SELECT version_num FROM alembic_version").fetchone()["version_num"] >= "0023"
        columns = db.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'tool_calls'"
        ).fetchall()
        assert "status_code" not in {c["column_name"] for c in columns}
        left = db.execute(
            "SELECT proname FROM pg_proc WHERE proname IN ('interface_1_statuses', 'compat_status_code')"
        ).fetchall()
        assert left == []
        replay = db.execute(
            "SELECT * FROM call_tool_v3('old-start', 'conv-old', 'pomodoro.start', 'fp', '{}',"
            " 'pomodoro_start', '{}')"
        ).fetchone()
        assert (replay["outcome"], replay["response"], replay["replayed"]) == ("accepted", ANSWER, True)
        # 0.4.0's operators' reads still find the status they select.
        read = db.execute("SELECT t.status_code FROM tool_calls t WHERE t.tool_call_id = 'old-start'")
        assert read.fetchone()["status_code"] == 202

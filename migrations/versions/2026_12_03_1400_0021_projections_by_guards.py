"""The stream events of operations and of the foreground written by the tables' guards

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-03 14:00:00+00:00

An operation's stream event (it opened or changed state) and the foreground's (it changed) were
written by AFTER row triggers of their own, ``project_operation`` and ``project_workspace``
(``service/db/sql/30_projections.sql``): each event queued, then fired at the statement's end, a
function call with its own ``search_path``, about a fifth of a start+interrupt cycle's database
instructions for its four events (``bench.db_parts``, bench/README.md). ``operations_guard`` and
``workspaces_guard`` (``service/db/sql/20_guards.sql``), the BEFORE row triggers every writer of
those rows fires anyway, write the same events now: the same payloads, the same numbers, in the same
order, for every writer (the decisions, the sweeper, the Host's foreground switch, the release still
serving, which writes through the same tables).

``tool_calls``' three CHECKs (the tool_call_id's length, the status code's range, the outcome word)
go to ``tool_calls_guard`` as ``operations``' went to ``operations_guard`` in migration 0020: the
same rules under the same names, compiled once per session instead of read back from the catalog
and prepared at every INSERT (one per tool call).

One transaction: the guards are replaced (from that file, recorded in ``database_code`` as migrate
records it, so the database code applied next leaves them as they are), the two triggers and
their functions and the three CHECKs dropped, under the tables' locks: no write sees both or
neither. The tables are locked together first under a short ``lock_timeout`` tried again until it succeeds, so the release
still serving waits for a moment instead of failing.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import psycopg
from alembic import op

from service.db import code

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Locked together, in the order every use case writes them.
TABLES = ("workspaces", "operations", "tool_calls", "projection_events")
# operation_json (and rfc3339, which it calls) first: operations_guard builds the event with it, and
# neither a new database nor the release before 0019 has it until the database code is applied
# after the migrations (make upgrade: every operation written in between failed).
GUARD = (
    ("function", "rfc3339"),
    ("function", "operation_json"),
    ("function", "operations_guard"),
    ("function", "workspaces_guard"),
    ("function", "tool_calls_guard"),
    ("trigger", "tool_calls.tool_calls_guard"),
)
# tool_calls' three CHECKs, held by tool_calls_guard from here on (every tool call inserts a row).
TOOL_CALL_CHECKS = (
    "ck_tool_calls_outcome_word",
    "ck_tool_calls_status_code",
    "ck_tool_calls_tool_call_id_length",
)
DROPPED = (
    "DROP TRIGGER IF EXISTS project_operation ON operations",
    "DROP TRIGGER IF EXISTS project_workspace ON workspaces",
    "DROP FUNCTION IF EXISTS project_operation()",
    "DROP FUNCTION IF EXISTS project_workspace()",
)
FORGOTTEN = (
    ("trigger", "operations.project_operation"),
    ("trigger", "workspaces.project_workspace"),
    ("function", "project_operation"),
    ("function", "project_workspace"),
)
LOCK_TIMEOUT = "200ms"  # below deadlock_timeout: the migration gives way before a deadlock is found
LOCK_ATTEMPTS = 300


def _lock(conn: psycopg.Connection[Any]) -> None:
    conn.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
    for attempt in range(LOCK_ATTEMPTS):
        try:
            with conn.transaction():
                conn.execute(f"LOCK TABLE {', '.join(TABLES)} IN ACCESS EXCLUSIVE MODE")
        except psycopg.errors.LockNotAvailable:
            if attempt == LOCK_ATTEMPTS - 1:
                raise
            time.sleep(0.05)
            continue
        break
    conn.execute("SET LOCAL lock_timeout = 0")


def upgrade() -> None:
    with op.get_context().autocommit_block():
        conn = op.get_bind().connection.driver_connection
        assert isinstance(conn, psycopg.Connection)
        with conn.transaction():
            _lock(conn)
            conn.execute("SET LOCAL check_function_bodies = off")
            if conn.execute("SELECT to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL").fetchone() == (
                True,
            ):
                # As migrate applies triggers on Citus (service/db/code.py): each fires on its shard.
                conn.execute("SET LOCAL citus.enable_unsafe_triggers = on")
            wanted = {d.key: d for d in code.definitions()}
            for key in GUARD:
                definition = wanted[key]
                conn.execute(definition.sql)
                conn.execute(
                    "INSERT INTO database_code (kind, name, checksum) VALUES (%s, %s, %s)"
                    " ON CONFLICT (kind, name) DO UPDATE SET checksum = EXCLUDED.checksum, applied_at = now()",
                    (definition.kind, definition.name, definition.checksum),
                )
            for statement in DROPPED:
                conn.execute(statement)
            conn.execute(
                "ALTER TABLE tool_calls "
                + ", ".join(f"DROP CONSTRAINT IF EXISTS {name}" for name in TOOL_CALL_CHECKS)
            )
            for kind, name in FORGOTTEN:
                conn.execute("DELETE FROM database_code WHERE kind = %s AND name = %s", (kind, name))


def downgrade() -> None:
    raise NotImplementedError("forward-only migrations")

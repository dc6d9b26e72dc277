"""the contract step after release 0.4.0: what only the releases before it needed goes

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-07 14:00:00+00:00

Release 0.4.0 (``releases.toml``) calls interface 4 of the database code alone and writes every
column it needs, so what the schema kept for the releases before it goes:

- ``tool_calls.status_code`` (the HTTP status, kept nullable by migration 0019 for the release
  before it). 0.4.0 writes it only through its database code (``compat_status_code`` in
  ``call_tool_v3`` and history retention) and reads it in two operators' reads, which select
  ``t.status_code`` of a ``tool_calls`` row: from here on that is the function ``status_code(tool_calls)``
  (``service/db/sql/99_compat.sql``; a function of one row is read as the row's field), made here
  before the column goes.
- ``interaction_tasks``' narrow unique key on ``tool_call_id`` (kept by migration 0018 for the
  ``ON CONFLICT (tool_call_id)`` of the release before it; 0.4.0 names the conversation too) and
  ``projection_events.event_seq``'s identity (0.4.0 numbers every event itself, under the
  conversation's lock).
- The compatibility triggers that gave a row its ``conversation_id`` (migration 0018) or its
  ``outcome`` (migration 0019) when the release before those migrations wrote it without.
- Interfaces 1 and 2 (``call_tool``, ``call_tool_v2``, ``interface_1_statuses``), the wrappers of
  interface 3 (``settle_focusing``, ``close_instances``, ``answer_interaction``) and
  ``compat_status_code``, dropped here in an order their dependencies allow
  (``compat_status_code``'s body names ``interface_1_statuses``, and Postgres keeps that
  dependency: the database code ``migrate`` applies next, which drops what the files no longer
  hold in no particular order, was refused it).

Two transactions of its own, both committed before the database code is applied
(``migrations/env.py``):

1. The functions that write or check ``status_code`` are made as the files have them now (they name
   no ``status_code``), with ``status_code(tool_calls)``; no table is locked. From this commit on,
   every call (0.4.0's included: they run the same database code) runs the new bodies.
2. The tables whose column, key, identity or triggers go are locked together, under a short
   ``lock_timeout`` tried again until it succeeds (0.4.0, still serving, waits a moment instead of
   failing), then they go. The lock waits for every transaction that touched those tables: a call
   that began before the first commit, still running the old ``call_tool_v3`` (its text names the
   column), ends before the column goes. In one transaction, such a call held behind the lock
   ran the old text against the table without it: ``make upgrade`` saw two 500s.
"""

from __future__ import annotations

from collections.abc import Sequence

from service.db.migration_steps import lock_tables, make_code, own_connection

revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The tables whose compatibility triggers, keys or identity go, in the order the use cases write them.
TABLES = (
    "instance_states",
    "surface_events",
    "interaction_tasks",
    "outbox_attempts",
    "tool_calls",
    "projection_events",
)
# What writes or checks status_code today, made from the files (which no longer name it), and what
# 0.4.0's reads of it find once it is gone.
WITHOUT_STATUS_CODE = (
    ("function", "call_tool_v3"),
    ("function", "expire_tool_call_answers"),
    ("function", "prune_conversation"),
    ("function", "status_code"),
)
# tool_calls_guard without status_code, as service/db/sql/20_guards.sql held it until migration 0024
# (which gave its rules back to CHECK constraints and dropped it): a migration makes what it made.
TOOL_CALLS_GUARD = r"""
CREATE OR REPLACE FUNCTION tool_calls_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    broken text;
BEGIN
    IF char_length(NEW.tool_call_id) BETWEEN 1 AND 255
       AND char_length(NEW.outcome) <= 63 AND NEW.outcome ~ '^[a-z][a-z0-9_]*$' THEN
        RETURN NEW;
    END IF;
    broken := CASE
        WHEN NOT (NEW.outcome ~ '^[a-z][a-z0-9_]{0,62}$') THEN 'ck_tool_calls_outcome_word'
        WHEN NOT (char_length(NEW.tool_call_id) BETWEEN 1 AND 255) THEN 'ck_tool_calls_tool_call_id_length'
    END;
    IF broken IS NOT NULL THEN
        RAISE EXCEPTION 'new row for relation "tool_calls" violates check constraint "%"', broken
            USING ERRCODE = 'check_violation', CONSTRAINT = broken, TABLE = 'tool_calls';
    END IF;
    RETURN NEW;
END $$;
"""
DROPPED = (
    "DROP TRIGGER IF EXISTS compat_instance_states_conversation ON instance_states",
    "DROP TRIGGER IF EXISTS compat_surface_events_conversation ON surface_events",
    "DROP TRIGGER IF EXISTS compat_interaction_tasks_conversation ON interaction_tasks",
    "DROP TRIGGER IF EXISTS compat_outbox_attempts_conversation ON outbox_attempts",
    "DROP TRIGGER IF EXISTS compat_tool_calls_outcome ON tool_calls",
    "DROP TRIGGER IF EXISTS compat_tool_calls_expired_outcome ON tool_calls",
    "DROP FUNCTION IF EXISTS compat_conversation_of_instance()",
    "DROP FUNCTION IF EXISTS compat_conversation_of_event()",
    "DROP FUNCTION IF EXISTS compat_conversation_of_interaction()",
    "DROP FUNCTION IF EXISTS compat_outcome_of_answer()",
    "DROP FUNCTION IF EXISTS call_tool(text, text, text, text, jsonb, double precision, integer)",
    "DROP FUNCTION IF EXISTS call_tool_v2(text, text, text, text, jsonb, regproc, jsonb)",
    "DROP FUNCTION IF EXISTS compat_status_code(text, jsonb)",
    "DROP FUNCTION IF EXISTS interface_1_statuses()",
    "DROP FUNCTION IF EXISTS settle_focusing(uuid[], text, text, boolean)",
    "DROP FUNCTION IF EXISTS close_instances(uuid[], timestamp with time zone, boolean)",
    "DROP FUNCTION IF EXISTS answer_interaction(text, text)",
    "ALTER TABLE tool_calls DROP COLUMN IF EXISTS status_code",
    "ALTER TABLE interaction_tasks DROP CONSTRAINT IF EXISTS uq_interaction_tasks_tool_call_id",
    "ALTER TABLE projection_events ALTER COLUMN event_seq DROP IDENTITY IF EXISTS",
)
FORGOTTEN = (
    ("trigger", "instance_states.compat_instance_states_conversation"),
    ("trigger", "surface_events.compat_surface_events_conversation"),
    ("trigger", "interaction_tasks.compat_interaction_tasks_conversation"),
    ("trigger", "outbox_attempts.compat_outbox_attempts_conversation"),
    ("trigger", "tool_calls.compat_tool_calls_outcome"),
    ("trigger", "tool_calls.compat_tool_calls_expired_outcome"),
    ("function", "compat_conversation_of_instance"),
    ("function", "compat_conversation_of_event"),
    ("function", "compat_conversation_of_interaction"),
    ("function", "compat_outcome_of_answer"),
    ("function", "call_tool"),
    ("function", "call_tool_v2"),
    ("function", "compat_status_code"),
    ("function", "interface_1_statuses"),
    ("function", "settle_focusing"),
    ("function", "close_instances"),
    ("function", "answer_interaction"),
)


def upgrade() -> None:
    with own_connection() as conn:
        with conn.transaction():
            conn.execute("SET LOCAL check_function_bodies = off")
            conn.execute(TOOL_CALLS_GUARD)
            make_code(conn, WITHOUT_STATUS_CODE)
        with conn.transaction():
            lock_tables(conn, TABLES)
            for statement in DROPPED:
                conn.execute(statement)
            for kind, name in FORGOTTEN:
                conn.execute("DELETE FROM database_code WHERE kind = %s AND name = %s", (kind, name))


def downgrade() -> None:
    raise NotImplementedError("forward-only migrations")

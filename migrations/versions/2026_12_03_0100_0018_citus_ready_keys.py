"""Citus-ready keys: every key of conversation data includes conversation_id

Revision ID: 0018
Revises: 0016
Create Date: 2026-12-03 01:00:00+00:00

Citus accepts a primary key, a unique key and a foreign key between distributed tables only when
it includes the distribution column (docs/scaling.md). So:

- the four tables that lacked it get ``conversation_id``, copied from their parent
  (``instance_states`` and ``surface_events`` from their instance, ``outbox_attempts`` from its
  outbox row, ``interaction_tasks`` from its interaction), NOT NULL;
- every primary and unique key of conversation data gains ``conversation_id`` as its LAST column,
  so that a lookup by the id alone (``GET /v1/operations/{id}``, the relay's outcome by
  ``event_id``) still walks the same index and no index is added to the tool call's writes;
- every foreign key between them gains it as well (their names stay: they are named after their
  first column), ``workspaces``' foreground included;
- ``projection_events.event_seq`` is no longer an identity (one range per Citus worker, and a
  shard moved to another worker would go on with lower numbers): ``project()`` takes the next one
  of its conversation under the conversation's lock (``service/db/sql/30_projections.sql``); its
  primary key is ``(conversation_id, event_seq)``, which is also the index the streams read by.

``tool_call_id`` is unique per conversation from here on, on every deployment alike (the contract's
"Past one primary").

Its own transaction, committed before the database code is applied (``migrations/env.py``):
the tables are locked together first, in the order every use case locks them, under a short
``lock_timeout`` tried again until it succeeds, so that the release still serving waits for a
moment instead of failing or deadlocking. Between that commit and the database code's, the
release before runs its own functions on the new shape: what it writes without the new columns is
completed by the compatibility triggers of ``service/db/sql/99_compat.sql`` (made here, as that
file held them until migration 0023 dropped them), its projection events still take their number from
the identity (kept, ``BY DEFAULT``, until the contract release), and ``interaction_tasks`` keeps its
narrow unique key on ``tool_call_id`` for its ``ON CONFLICT`` (``python -m service distribute``
drops it: no release before this one runs on Citus).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from service.db.migration_steps import lock_tables, own_connection

revision: str = "0018"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Every table of conversation data, workspaces first (the lock every use case takes first).
TABLES = (
    "workspaces",
    "tool_calls",
    "app_instances",
    "sub_sessions",
    "instance_states",
    "operations",
    "outbox",
    "outbox_attempts",
    "capabilities",
    "surface_events",
    "messages",
    "interactions",
    "interaction_tasks",
    "projection_events",
)

# (table, parent, the join) for the tables that lacked conversation_id.
NEW_COLUMNS = (
    ("instance_states", "app_instances", "p.instance_id = t.instance_id"),
    ("surface_events", "app_instances", "p.instance_id = t.instance_id"),
    ("outbox_attempts", "outbox", "p.event_id = t.event_id"),
    ("interaction_tasks", "interactions", "p.tool_call_id = t.tool_call_id"),
)

# Foreign keys whose referenced key is widened: (table, name, columns, referenced table, its
# columns, ON DELETE), re-made with conversation_id as their last column.
FOREIGN_KEYS = (
    (
        "workspaces",
        "fk_workspaces_foreground_instance_id_app_instances",
        "foreground_instance_id",
        "app_instances",
        "instance_id",
        "",
    ),
    (
        "sub_sessions",
        "fk_sub_sessions_instance_id_app_instances",
        "instance_id",
        "app_instances",
        "instance_id",
        "",
    ),
    (
        "instance_states",
        "fk_instance_states_instance_id_app_instances",
        "instance_id",
        "app_instances",
        "instance_id",
        "",
    ),
    (
        "operations",
        "fk_operations_instance_id_app_instances",
        "instance_id",
        "app_instances",
        "instance_id",
        "",
    ),
    ("outbox", "fk_outbox_operation_id_operations", "operation_id", "operations", "operation_id", ""),
    (
        "outbox_attempts",
        "fk_outbox_attempts_event_id_outbox",
        "event_id",
        "outbox",
        "event_id",
        " ON DELETE CASCADE",
    ),
    (
        "capabilities",
        "fk_capabilities_instance_id_app_instances",
        "instance_id",
        "app_instances",
        "instance_id",
        "",
    ),
    (
        "surface_events",
        "fk_surface_events_instance_id_app_instances",
        "instance_id",
        "app_instances",
        "instance_id",
        "",
    ),
    (
        "messages",
        "fk_messages_sub_session_id_sub_sessions",
        "sub_session_id",
        "sub_sessions",
        "sub_session_id",
        "",
    ),
    (
        "interactions",
        "fk_interactions_asked_in_sub_session_id_sub_sessions",
        "asked_in_sub_session_id",
        "sub_sessions",
        "sub_session_id",
        "",
    ),
    (
        "interaction_tasks",
        "fk_interaction_tasks_tool_call_id_interactions",
        "tool_call_id",
        "interactions",
        "tool_call_id",
        "",
    ),
)

# Primary keys: (table, its columns before conversation_id).
PRIMARY_KEYS = (
    ("tool_calls", "tool_call_id"),
    ("app_instances", "instance_id"),
    ("sub_sessions", "sub_session_id"),
    ("instance_states", "instance_id"),
    ("operations", "operation_id"),
    ("outbox", "event_id"),
    ("outbox_attempts", "attempt_id"),
    ("capabilities", "token_hash"),
    ("surface_events", "surface_event_id"),
    ("messages", "message_id"),
    ("interactions", "tool_call_id"),
    ("interaction_tasks", "task_id"),
)

# Unique keys: (table, old name, its columns before conversation_id); the new name follows the
# naming convention (uq_<table>_<columns>).
UNIQUE_KEYS = (
    ("sub_sessions", "uq_sub_sessions_instance_id", "instance_id"),
    ("operations", "uq_operations_tool_call_id", "tool_call_id"),
    ("outbox", "uq_outbox_tool_call_id", "tool_call_id"),
    ("outbox_attempts", "uq_outbox_attempts_event_id_attempt", "event_id, attempt"),
    ("interaction_tasks", "uq_interaction_tasks_tool_call_id", "tool_call_id"),
)

#: The database code the release before needs while it runs on the new shape, as
#: service/db/sql/99_compat.sql held it until migration 0023 dropped it (kept here as it was, since
#: a migration is history): a row written without its conversation_id gets its parent's.
COMPAT_CODE = (
    """
CREATE OR REPLACE FUNCTION compat_conversation_of_instance() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    SELECT a.conversation_id INTO NEW.conversation_id FROM app_instances a
    WHERE a.instance_id = NEW.instance_id;
    RETURN NEW;
END $$""",
    """
CREATE OR REPLACE FUNCTION compat_conversation_of_event() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    SELECT o.conversation_id INTO NEW.conversation_id FROM outbox o WHERE o.event_id = NEW.event_id;
    RETURN NEW;
END $$""",
    """
CREATE OR REPLACE FUNCTION compat_conversation_of_interaction() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    SELECT i.conversation_id INTO NEW.conversation_id FROM interactions i
    WHERE i.tool_call_id = NEW.tool_call_id
    ORDER BY i.created_at DESC
    LIMIT 1;
    RETURN NEW;
END $$""",
    """
CREATE OR REPLACE TRIGGER compat_instance_states_conversation BEFORE INSERT ON instance_states
FOR EACH ROW WHEN (NEW.conversation_id IS NULL) EXECUTE FUNCTION compat_conversation_of_instance()""",
    """
CREATE OR REPLACE TRIGGER compat_surface_events_conversation BEFORE INSERT ON surface_events
FOR EACH ROW WHEN (NEW.conversation_id IS NULL) EXECUTE FUNCTION compat_conversation_of_instance()""",
    """
CREATE OR REPLACE TRIGGER compat_outbox_attempts_conversation BEFORE INSERT ON outbox_attempts
FOR EACH ROW WHEN (NEW.conversation_id IS NULL) EXECUTE FUNCTION compat_conversation_of_event()""",
    """
CREATE OR REPLACE TRIGGER compat_interaction_tasks_conversation BEFORE INSERT ON interaction_tasks
FOR EACH ROW WHEN (NEW.conversation_id IS NULL) EXECUTE FUNCTION compat_conversation_of_interaction()""",
)


def _widen(conn: psycopg.Connection[Any]) -> None:
    for table, parent, join in NEW_COLUMNS:
        conn.execute(f"ALTER TABLE {table} ADD COLUMN conversation_id text")
        conn.execute(f"UPDATE {table} t SET conversation_id = p.conversation_id FROM {parent} p WHERE {join}")
        conn.execute(f"ALTER TABLE {table} ALTER COLUMN conversation_id SET NOT NULL")
    for table, name, *_ in FOREIGN_KEYS:
        conn.execute(f"ALTER TABLE {table} DROP CONSTRAINT {name}")
    for table, columns in PRIMARY_KEYS:
        conn.execute(
            f"ALTER TABLE {table} DROP CONSTRAINT pk_{table},"
            f" ADD CONSTRAINT pk_{table} PRIMARY KEY ({columns}, conversation_id)"
        )
    for table, old, columns in UNIQUE_KEYS:
        new = f"uq_{table}_{'_'.join(c.strip() for c in columns.split(','))}_conversation_id"
        keep_old = table == "interaction_tasks"  # the release before's ON CONFLICT (tool_call_id)
        drop = "" if keep_old else f"DROP CONSTRAINT {old}, "
        conn.execute(f"ALTER TABLE {table} {drop}ADD CONSTRAINT {new} UNIQUE ({columns}, conversation_id)")
    for table, name, column, referenced, referenced_column, on_delete in FOREIGN_KEYS:
        conn.execute(
            f"ALTER TABLE {table} ADD CONSTRAINT {name} FOREIGN KEY ({column}, conversation_id)"
            f" REFERENCES {referenced} ({referenced_column}, conversation_id){on_delete}"
        )
    # The streams' sequence: the conversation's own (project(), under the conversation's lock).
    conn.execute("ALTER TABLE projection_events ALTER COLUMN event_seq SET GENERATED BY DEFAULT")
    conn.execute(
        "ALTER TABLE projection_events DROP CONSTRAINT pk_projection_events,"
        " ADD CONSTRAINT pk_projection_events PRIMARY KEY (conversation_id, event_seq)"
    )
    conn.execute("DROP INDEX ix_projection_events_conversation_seq")
    # Made here, committed with the new columns (migration 0023 drops them again).
    conn.execute("SET LOCAL check_function_bodies = off")
    for statement in COMPAT_CODE:
        conn.execute(statement)


def upgrade() -> None:
    with own_connection() as conn, conn.transaction():
        lock_tables(conn, TABLES)
        _widen(conn)


def downgrade() -> None:
    raise NotImplementedError("forward-only migrations")

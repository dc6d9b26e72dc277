"""The operation's row rules in one trigger instead of eight CHECK constraints and a generated column

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-03 11:00:00+00:00

Postgres reads a table's CHECK expressions back from the catalog (``stringToNode``) and prepares
them again at every INSERT and UPDATE statement; ``operations``' eight cost a start+interrupt cycle
about 0.8 M of its 6.4 M database instructions (``bench.db_instructions_check``, bench/README.md).
``operations_guard`` (``service/db/sql/20_guards.sql``) holds the same rules, compiled once per
session, and refuses each under its constraint's old name with ``check_violation``; it also holds
the rule ``operations_final_is_final`` held (a terminal state never changes), so an UPDATE fires
one trigger, as before. It keeps ``lateness_ms`` too, with the expression of the stored generated
column it was (read back and prepared at every statement as well): the column stays, its values
with it (``DROP EXPRESSION`` rewrites nothing).

``workspaces``' two CHECKs (the conversation_id's length, a non-negative ``outbox_sequence``) go
to ``workspaces_guard`` the same way: the row is written two or three times per tool call.

Four checks of one of a few words (``app_instances.status``, ``sub_sessions.status``,
``outbox.status``, ``projection_events.kind``) are stored again as one array constant each, the
same rule in a form shorter to read back (``NOT VALID``, then validated after the commit: a scan
that lets writes through).

One transaction: the trigger is made (from that file, recorded in ``database_code`` as migrate
records it, so the database code applied next leaves it as it is), the old trigger and the CHECKs
dropped, the four checks re-made — there is no moment without the rules. The five tables are
locked together first under a short
``lock_timeout`` tried again until it succeeds, so the release still serving waits for a moment
instead of failing. The release before writes operations only through the database's own functions
(this release's), so the rules it meets are the same.
"""

from __future__ import annotations

from collections.abc import Sequence

from service.db.migration_steps import lock_tables, make_code, own_connection

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CHECKS = (
    "ck_operations_activity_length",
    "ck_operations_completed_not_early",
    "ck_operations_duration",
    "ck_operations_ends_at",
    "ck_operations_final_has_result",
    "ck_operations_reason",
    "ck_operations_state",
    "ck_operations_state_matches_reason",
)
# The checks of one of a few words that a tool call's statements meet, stored again as one array
# constant (service.db.tables.conventions.any_of): the same rule, shorter to read back at each
# statement. (table, constraint, column, words)
WORDS = (
    ("app_instances", "ck_app_instances_status", "status", ("open", "closed")),
    ("sub_sessions", "ck_sub_sessions_status", "status", ("open", "ended")),
    ("outbox", "ck_outbox_status", "status", ("pending", "delivered", "dead")),
    (
        "projection_events",
        "ck_projection_events_kind",
        "kind",
        ("operation", "workspace", "message", "interaction"),
    ),
)
# Locked together, in the order every use case writes them.
TABLES = ("workspaces", "app_instances", "sub_sessions", "operations", "outbox", "projection_events")
GUARD = (
    ("function", "operations_guard"),
    ("trigger", "operations.operations_guard"),
    ("function", "workspaces_guard"),
    ("trigger", "workspaces.workspaces_guard"),
)
# workspaces' two CHECKs, held by workspaces_guard from here on (its row is written two or three
# times per tool call).
WORKSPACE_CHECKS = ("ck_workspaces_conversation_id_length", "ck_workspaces_outbox_sequence_nonnegative")
# The guards' functions as this migration made them (service/db/sql/20_guards.sql at 0020), not as
# the files hold them now: migration 0021 gave them the stream events of the AFTER triggers it drops,
# and made here from today's files they wrote each event a second time (and called operation_json
# before it existed) for whatever the release still serving wrote between the two migrations' commits.
# The database code applied after the migrations replaces them with the files' (no checksum is
# recorded for them here).
FUNCTIONS_AT_0020 = {
    ("function", "operations_guard"): r"""
CREATE OR REPLACE FUNCTION operations_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    broken text;
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.state <> 'focusing' AND (NEW.state, NEW.reason, NEW.result::text)
            IS DISTINCT FROM (OLD.state, OLD.reason, OLD.result::text) THEN
        RAISE EXCEPTION 'operation % is already %', OLD.operation_id, OLD.state
            USING ERRCODE = 'check_violation', CONSTRAINT = 'operation_final_is_final';
    END IF;
    -- How late a deadline was decided: a stored generated column until migration 0020, whose
    -- expression Postgres, too, read back and prepared at every statement.
    NEW.lateness_ms := CASE WHEN NEW.reason = 'deadline_reached'
                            THEN (EXTRACT(EPOCH FROM NEW.finalized_at - NEW.ends_at) * 1000)::integer END;
    IF (NEW.state = 'focusing' AND NEW.reason IS NULL AND NEW.finalized_at IS NULL AND NEW.result IS NULL
            OR NEW.state = 'completed' AND NEW.reason = 'deadline_reached'
               AND NEW.finalized_at >= NEW.ends_at AND NEW.result IS NOT NULL
            OR NEW.state = 'interrupted' AND NEW.reason IN ('agent_interrupt', 'user_left_workspace')
               AND NEW.finalized_at IS NOT NULL AND NEW.result IS NOT NULL
            OR NEW.state = 'cancelled' AND NEW.reason = 'app_closed'
               AND NEW.finalized_at IS NOT NULL AND NEW.result IS NOT NULL)
       AND NEW.duration_seconds BETWEEN 1 AND 14400
       AND NEW.ends_at = NEW.started_at + make_interval(secs => NEW.duration_seconds)
       AND (NEW.activity IS NULL OR char_length(NEW.activity) <= 200) THEN
        RETURN NEW;
    END IF;
    -- Something is wrong, or NULL where a CHECK would pass: each rule as its CHECK was.
    broken := CASE
        WHEN NOT (NEW.activity IS NULL OR char_length(NEW.activity) <= 200)
            THEN 'ck_operations_activity_length'
        WHEN NOT (NEW.state <> 'completed' OR NEW.finalized_at >= NEW.ends_at)
            THEN 'ck_operations_completed_not_early'
        WHEN NOT (NEW.duration_seconds BETWEEN 1 AND 14400)
            THEN 'ck_operations_duration'
        WHEN NOT (NEW.ends_at = NEW.started_at + make_interval(secs => NEW.duration_seconds))
            THEN 'ck_operations_ends_at'
        WHEN NOT (NEW.state = 'focusing' OR NEW.finalized_at IS NOT NULL AND NEW.result IS NOT NULL)
            THEN 'ck_operations_final_has_result'
        WHEN NOT (NEW.reason IS NULL OR NEW.reason IN ('deadline_reached', 'agent_interrupt',
                                                       'user_left_workspace', 'app_closed'))
            THEN 'ck_operations_reason'
        WHEN NOT (NEW.state IN ('focusing', 'completed', 'interrupted', 'cancelled'))
            THEN 'ck_operations_state'
        WHEN NOT coalesce(NEW.state = 'focusing' AND NEW.reason IS NULL AND NEW.finalized_at IS NULL
                              AND NEW.result IS NULL
                          OR NEW.state = 'completed' AND NEW.reason = 'deadline_reached'
                          OR NEW.state = 'interrupted'
                             AND NEW.reason IN ('agent_interrupt', 'user_left_workspace')
                          OR NEW.state = 'cancelled' AND NEW.reason = 'app_closed', false)
            THEN 'ck_operations_state_matches_reason'
    END;
    IF broken IS NOT NULL THEN
        RAISE EXCEPTION 'new row for relation "operations" violates check constraint "%"', broken
            USING ERRCODE = 'check_violation', CONSTRAINT = broken, TABLE = 'operations';
    END IF;
    RETURN NEW;
END $$;
""",
    ("function", "workspaces_guard"): r"""
CREATE OR REPLACE FUNCTION workspaces_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF char_length(NEW.conversation_id) BETWEEN 1 AND 255 AND NEW.outbox_sequence >= 0 THEN
        RETURN NEW;
    END IF;
    IF NOT (char_length(NEW.conversation_id) BETWEEN 1 AND 255) THEN
        RAISE EXCEPTION 'new row for relation "workspaces" violates check constraint "%"',
            'ck_workspaces_conversation_id_length'
            USING ERRCODE = 'check_violation', CONSTRAINT = 'ck_workspaces_conversation_id_length',
                  TABLE = 'workspaces';
    END IF;
    IF NOT (NEW.outbox_sequence >= 0) THEN
        RAISE EXCEPTION 'new row for relation "workspaces" violates check constraint "%"',
            'ck_workspaces_outbox_sequence_nonnegative'
            USING ERRCODE = 'check_violation', CONSTRAINT = 'ck_workspaces_outbox_sequence_nonnegative',
                  TABLE = 'workspaces';
    END IF;
    RETURN NEW;
END $$;
""",
}


def upgrade() -> None:
    with own_connection() as conn:
        with conn.transaction():
            lock_tables(conn, TABLES)
            # The guards' functions as they were at 0020 (above), then their triggers from the
            # files, made and recorded as migrate makes them; on Citus each fires on its shard.
            conn.execute("SET LOCAL check_function_bodies = off")
            for key in GUARD:
                if key in FUNCTIONS_AT_0020:
                    conn.execute(FUNCTIONS_AT_0020[key])
            make_code(conn, [key for key in GUARD if key not in FUNCTIONS_AT_0020], citus_triggers=True)
            conn.execute("DROP TRIGGER IF EXISTS operations_final_is_final ON operations")
            conn.execute(
                "ALTER TABLE operations "
                + ", ".join(f"DROP CONSTRAINT IF EXISTS {name}" for name in CHECKS)
                + ", ALTER COLUMN lateness_ms DROP EXPRESSION IF EXISTS"
            )
            conn.execute(
                "ALTER TABLE workspaces "
                + ", ".join(f"DROP CONSTRAINT IF EXISTS {name}" for name in WORKSPACE_CHECKS)
            )
            for table, name, column, words in WORDS:
                conn.execute(
                    f"ALTER TABLE {table} DROP CONSTRAINT {name},"
                    f" ADD CONSTRAINT {name} CHECK ({column} = ANY ('{{{','.join(words)}}}'::text[])) NOT VALID"
                )
        # Validated after the commit, each on its own: a scan that lets writes through (the rows
        # already hold the same rule, so it cannot fail).
        for table, name, *_ in WORDS:
            conn.execute(f"ALTER TABLE {table} VALIDATE CONSTRAINT {name}")


def downgrade() -> None:
    raise NotImplementedError("forward-only migrations")

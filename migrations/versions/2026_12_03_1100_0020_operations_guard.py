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


def upgrade() -> None:
    with own_connection() as conn:
        with conn.transaction():
            lock_tables(conn, TABLES)
            # As migrate applies triggers on Citus (service/db/code.py): each fires on its shard.
            make_code(conn, GUARD, citus_triggers=True)
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

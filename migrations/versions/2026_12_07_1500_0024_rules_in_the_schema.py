"""The row rules back in the catalog as CHECK constraints, the operation's key to its workspace back,
and what a Tool declares of its operations held generically

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-07 15:00:00+00:00

Migrations 0020 to 0022 moved the row rules of ``operations``, ``workspaces``, ``tool_calls``,
``app_instances``, ``sub_sessions`` and ``instance_states`` from CHECK constraints into BEFORE
triggers that refused each under its old name by hand, and dropped
``fk_operations_conversation_id_workspaces``, to save database instructions. The rules of
``workspaces``, ``tool_calls``, ``app_instances``, ``sub_sessions`` and ``instance_states`` come
back as CHECK constraints under the same names (a reader finds them in the catalog, not in code),
and the key comes back; the triggers keep what is not a row rule (a terminal operation never
changing, ``lateness_ms``, the Host's event stream, a read-only snapshot staying so). The three
guards left with nothing to do (``tool_calls_guard``, ``app_instances_guard``,
``sub_sessions_guard``) go. What each costs a start+interrupt cycle in database instructions
(``bench.db_parts``, 100 cycles, each dropped alone from this schema): workspaces' two CHECKs 149 k,
app_instances' 100 k, sub_sessions' 105 k, instance_states' 66 k, tool_calls' 174 k — each under
5 % of a cycle (4.6 M without them).

The exception: ``operations``' eight rules stay in ``operations_guard``. As CHECKs they cost a cycle
822 k instructions (18 % of it: Postgres reads each back from the catalog and prepares it again at
the cycle's INSERT and UPDATE of the row); the trigger holds them under the CHECKs' names, and
``service/db/tables/workspaces.py`` lists them beside the table.

A MiniApp's decisions open operations through the Runtime's API (``service/db/sql/75_app_api.sql``),
which holds each to what its Tool declares in its manifest (``"operation"``), copied by ``migrate``
into the new table ``app_tools``: ``operations.one_running`` (new, NULL for the rows there) says
the Tool declares at most one running per conversation, and ``uq_operations_one_running_per_tool``,
over ``(conversation_id, tool)`` of the focusing rows that say so, holds it for every Tool alike. It
replaces ``uq_operations_one_focusing_per_conversation``, which named one Tool. ``migrate`` marks the
running operations of a declaring Tool once the declarations are in (``service.db.code.declare_tools``);
until that commit, the Tools' decisions still refuse a second one under the conversation's lock.

Rolling: one short transaction under the tables' locks (taken together under a short
``lock_timeout`` tried again until it succeeds, so the release still serving waits a moment instead
of failing) adds the table, the column, the constraints ``NOT VALID`` (new rows meet them at once)
and drops the three guards' triggers; the guards left are made as the files have them, recorded as
``migrate`` records them. Then, each on its own, outside it: the index is built and the old one
dropped ``CONCURRENTLY``, and each constraint is validated (a scan that lets writes through; the rows
already hold the rules, so it cannot fail).
"""

from __future__ import annotations

from collections.abc import Sequence

from service.db.migration_steps import lock_tables, make_code, own_connection

revision: str = "0024"
down_revision: str | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Locked together, in the order every use case writes them.
TABLES = ("workspaces", "app_instances", "sub_sessions", "instance_states", "operations", "tool_calls")

# (table, constraint, expression): the rules as service/db/tables/ states them.
CHECKS = (
    ("workspaces", "ck_workspaces_conversation_id_length", "char_length(conversation_id) BETWEEN 1 AND 255"),
    ("workspaces", "ck_workspaces_outbox_sequence_nonnegative", "outbox_sequence >= 0"),
    ("app_instances", "ck_app_instances_status", "status = ANY ('{open,closed}'::text[])"),
    (
        "app_instances",
        "ck_app_instances_closed_at_iff_closed",
        "(status = 'closed') = (closed_at IS NOT NULL)",
    ),
    ("sub_sessions", "ck_sub_sessions_status", "status = ANY ('{open,ended}'::text[])"),
    ("sub_sessions", "ck_sub_sessions_ended_at_iff_ended", "(status = 'ended') = (ended_at IS NOT NULL)"),
    ("instance_states", "ck_instance_states_revision_nonnegative", "revision >= 0"),
    ("instance_states", "ck_instance_states_data_is_object", "jsonb_typeof(data) = 'object'"),
    ("tool_calls", "ck_tool_calls_tool_call_id_length", "char_length(tool_call_id) BETWEEN 1 AND 255"),
    (
        "tool_calls",
        "ck_tool_calls_outcome_word",
        "char_length(outcome) <= 63 AND outcome ~ '^[a-z][a-z0-9_]*$'",
    ),
)
FOREIGN_KEY = (
    "operations",
    "fk_operations_conversation_id_workspaces",
    "FOREIGN KEY (conversation_id) REFERENCES workspaces (conversation_id)",
)

STATEMENTS = (
    """CREATE TABLE IF NOT EXISTS app_tools (
        tool text NOT NULL,
        app_scope text NOT NULL,
        one_running boolean NOT NULL,
        max_seconds integer NOT NULL,
        CONSTRAINT pk_app_tools PRIMARY KEY (tool),
        CONSTRAINT ck_app_tools_max_seconds CHECK (max_seconds BETWEEN 1 AND 14400)
    )""",
    # Nullable, without a default: operation_json(operations, text) takes the row type, and Postgres
    # refuses a column with a default on a table whose row type a function's body uses.
    "ALTER TABLE operations ADD COLUMN IF NOT EXISTS one_running boolean",
    "DROP TRIGGER IF EXISTS tool_calls_guard ON tool_calls",
    "DROP TRIGGER IF EXISTS app_instances_guard ON app_instances",
    "DROP TRIGGER IF EXISTS sub_sessions_guard ON sub_sessions",
)
FORGOTTEN = (
    ("trigger", "tool_calls.tool_calls_guard"),
    ("trigger", "app_instances.app_instances_guard"),
    ("trigger", "sub_sessions.sub_sessions_guard"),
)
# The guards that stay, without the row rules (service/db/sql/20_guards.sql).
GUARDS = (
    ("function", "operations_guard"),
    ("function", "workspaces_guard"),
    ("function", "instance_states_readonly_is_final"),
)
CONCURRENTLY = (
    "CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS uq_operations_one_running_per_tool"
    " ON operations (conversation_id, tool) WHERE state = 'focusing' AND one_running",
    "DROP INDEX CONCURRENTLY IF EXISTS uq_operations_one_focusing_per_conversation",
)


def upgrade() -> None:
    with own_connection() as conn:
        present = {
            name
            for (name,) in conn.execute(
                "SELECT conname FROM pg_constraint WHERE connamespace = 'public'::regnamespace"
            ).fetchall()
        }
        with conn.transaction():
            lock_tables(conn, TABLES)
            for statement in STATEMENTS:
                conn.execute(statement)
            for table, name, expression in CHECKS:
                if name not in present:
                    conn.execute(f"ALTER TABLE {table} ADD CONSTRAINT {name} CHECK ({expression}) NOT VALID")
            table, name, definition = FOREIGN_KEY
            if name not in present:
                conn.execute(f"ALTER TABLE {table} ADD CONSTRAINT {name} {definition} NOT VALID")
            make_code(conn, GUARDS, citus_triggers=True)
            for kind, key in FORGOTTEN:
                conn.execute("DELETE FROM database_code WHERE kind = %s AND name = %s", (kind, key))
        # Each on its own (autocommit): writes go on meanwhile.
        for statement in CONCURRENTLY:
            conn.execute(statement)
        for table, name, _ in (*CHECKS, FOREIGN_KEY):
            conn.execute(f"ALTER TABLE {table} VALIDATE CONSTRAINT {name}")


def downgrade() -> None:
    raise NotImplementedError("forward-only migrations")

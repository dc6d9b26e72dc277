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
# operations_guard as service/db/sql/20_guards.sql held it until migration 0029, which added
# `failed` and its `failure` column (a migration is history: it makes what it made, and the file's
# text names a column this one does not have yet).
OPERATIONS_GUARD_AT_0024 = r"""
CREATE OR REPLACE FUNCTION operations_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    broken text;
    holds boolean;
    changed operations;
    last_seq bigint;
    max_seconds integer;
BEGIN
    IF TG_OP = 'INSERT' THEN
        SELECT t.one_running, t.max_seconds INTO NEW.one_running, max_seconds
        FROM app_tools t WHERE t.tool = NEW.tool;
        -- (A duration no operation may have is ck_operations_duration's to refuse, under its name.)
        IF NEW.duration_seconds > max_seconds AND NEW.duration_seconds <= 14400 THEN
            RAISE EXCEPTION 'tool % declares deadlines at most % seconds away, not %', NEW.tool, max_seconds,
                NEW.duration_seconds
                USING ERRCODE = 'check_violation', CONSTRAINT = 'operation_declared_max_seconds';
        END IF;
    ELSIF OLD.state <> 'focusing' THEN
        IF (NEW.state, NEW.reason, NEW.result::text) IS DISTINCT FROM (OLD.state, OLD.reason, OLD.result::text) THEN
            RAISE EXCEPTION 'operation % is already %', OLD.operation_id, OLD.state
                USING ERRCODE = 'check_violation', CONSTRAINT = 'operation_final_is_final';
        END IF;
    END IF;
    -- How late a deadline was decided: a stored generated column until migration 0020, whose
    -- expression Postgres, too, read back and prepared at every statement.
    IF NEW.reason = 'deadline_reached' THEN
        NEW.lateness_ms := (EXTRACT(EPOCH FROM NEW.finalized_at - NEW.ends_at) * 1000)::integer;
    ELSE
        NEW.lateness_ms := NULL;
    END IF;
    -- A state with its reason, a final state with its result (a state matches one branch only).
    IF NEW.state = 'focusing' THEN
        holds := NEW.reason IS NULL AND NEW.finalized_at IS NULL AND NEW.result IS NULL;
    ELSIF NEW.state = 'interrupted' THEN
        holds := NEW.reason IN ('agent_interrupt', 'person_interrupt', 'user_left_workspace')
                 AND NEW.finalized_at IS NOT NULL AND NEW.result IS NOT NULL;
    ELSE
        holds := NEW.state = 'completed' AND NEW.reason = 'deadline_reached'
                   AND NEW.finalized_at >= NEW.ends_at AND NEW.result IS NOT NULL
                 OR NEW.state = 'cancelled' AND NEW.reason = 'app_closed'
                   AND NEW.finalized_at IS NOT NULL AND NEW.result IS NOT NULL;
    END IF;
    IF holds
       AND NEW.duration_seconds BETWEEN 1 AND 14400
       AND NEW.ends_at = NEW.started_at + make_interval(secs => NEW.duration_seconds)
       AND (NEW.activity IS NULL OR char_length(NEW.activity) <= 200) THEN
        NULL;  -- every rule holds
    ELSE
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
                                                           'person_interrupt', 'user_left_workspace',
                                                           'app_closed'))
                THEN 'ck_operations_reason'
            WHEN NOT (NEW.state IN ('focusing', 'completed', 'interrupted', 'cancelled'))
                THEN 'ck_operations_state'
            WHEN NOT coalesce(NEW.state = 'focusing' AND NEW.reason IS NULL AND NEW.finalized_at IS NULL
                                  AND NEW.result IS NULL
                              OR NEW.state = 'completed' AND NEW.reason = 'deadline_reached'
                              OR NEW.state = 'interrupted'
                                 AND NEW.reason IN ('agent_interrupt', 'person_interrupt',
                                                    'user_left_workspace')
                              OR NEW.state = 'cancelled' AND NEW.reason = 'app_closed', false)
                THEN 'ck_operations_state_matches_reason'
        END;
        IF broken IS NOT NULL THEN
            RAISE EXCEPTION 'new row for relation "operations" violates check constraint "%"', broken
                USING ERRCODE = 'check_violation', CONSTRAINT = broken, TABLE = 'operations';
        END IF;
    END IF;
    -- The Host's event stream: an operation opened or changed state (30_projections.sql). Written
    -- here, by the trigger every writer of the table already fires, and not by an AFTER trigger of
    -- its own (project_operation until migration 0021), whose queueing and call cost a cycle about
    -- 0.3 M instructions (bench/README.md). The row is final here: this is the table's one BEFORE
    -- trigger, and what it projects is the row as written (a failing statement takes its event
    -- back with it). On Citus the trigger fires on a shard, whose rows are of the shard table's own
    -- type, which no operation_json(operations, text) takes: the row is copied into an `operations`
    -- value first.
    -- project()'s two statements in place (30_projections.sql numbers the events; a call of it is
    -- one more function with its own search_path per event).
    IF TG_OP = 'UPDATE' THEN
        IF NEW.state IS NOT DISTINCT FROM OLD.state THEN
            RETURN NEW;
        END IF;
    END IF;
    changed := NEW;
    SELECT e.event_seq INTO last_seq FROM projection_events e
    WHERE e.conversation_id = NEW.conversation_id
    ORDER BY e.event_seq DESC LIMIT 1;
    INSERT INTO projection_events (conversation_id, event_seq, kind, payload)
    VALUES (NEW.conversation_id,
            greatest(coalesce(last_seq, 0) + 1,
                     (EXTRACT(EPOCH FROM statement_timestamp()) * 1000000)::bigint),
            'operation', operation_json(changed, 'event'));
    RETURN NEW;
END $$;
"""
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
            conn.execute(OPERATIONS_GUARD_AT_0024)
            make_code(
                conn, [key for key in GUARDS if key != ("function", "operations_guard")], citus_triggers=True
            )
            for kind, key in FORGOTTEN:
                conn.execute("DELETE FROM database_code WHERE kind = %s AND name = %s", (kind, key))
        # Each on its own (autocommit): writes go on meanwhile.
        for statement in CONCURRENTLY:
            conn.execute(statement)
        for table, name, _ in (*CHECKS, FOREIGN_KEY):
            conn.execute(f"ALTER TABLE {table} VALIDATE CONSTRAINT {name}")


def downgrade() -> None:
    raise NotImplementedError("forward-only migrations")

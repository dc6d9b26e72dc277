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

from collections.abc import Sequence

from service.db.migration_steps import lock_tables, make_code, own_connection

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
# The guards' functions as this migration made them (service/db/sql/20_guards.sql at 0021), not as
# the files hold them now: migration 0022 changed them again (bench/README.md, issue 33's fourth
# round), and what the release still serving writes between the two migrations' commits meets the
# rules as they were at 0021. The database code applied after the migrations replaces them with the
# files' (no checksum is recorded for them here).
FUNCTIONS_AT_0021 = {
    ("function", "operations_guard"): r"""
CREATE OR REPLACE FUNCTION operations_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    broken text;
    changed operations;
    last_seq bigint;
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
""",
    ("function", "tool_calls_guard"): r"""
CREATE OR REPLACE FUNCTION tool_calls_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    broken text;
BEGIN
    IF char_length(NEW.tool_call_id) BETWEEN 1 AND 255
       AND (NEW.status_code IS NULL OR NEW.status_code BETWEEN 200 AND 599)
       AND NEW.outcome ~ '^[a-z][a-z0-9_]{0,62}$' THEN
        RETURN NEW;
    END IF;
    broken := CASE
        WHEN NOT (NEW.outcome ~ '^[a-z][a-z0-9_]{0,62}$') THEN 'ck_tool_calls_outcome_word'
        WHEN NOT (NEW.status_code BETWEEN 200 AND 599) THEN 'ck_tool_calls_status_code'
        WHEN NOT (char_length(NEW.tool_call_id) BETWEEN 1 AND 255) THEN 'ck_tool_calls_tool_call_id_length'
    END;
    IF broken IS NOT NULL THEN
        RAISE EXCEPTION 'new row for relation "tool_calls" violates check constraint "%"', broken
            USING ERRCODE = 'check_violation', CONSTRAINT = broken, TABLE = 'tool_calls';
    END IF;
    RETURN NEW;
END $$;
""",
}
# The trigger of tool_calls_guard as the files held it until migration 0024 (which dropped it: the
# rules are CHECK constraints again).
FUNCTIONS_AT_0021[("trigger", "tool_calls.tool_calls_guard")] = """
CREATE OR REPLACE TRIGGER tool_calls_guard BEFORE INSERT OR UPDATE ON tool_calls
FOR EACH ROW EXECUTE FUNCTION tool_calls_guard();
"""
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


def upgrade() -> None:
    with own_connection() as conn, conn.transaction():
        lock_tables(conn, TABLES)
        # As migrate applies triggers on Citus (service/db/code.py): each fires on its shard.
        # The functions as they were at 0021 (above), the rest from the files, made and recorded as
        # migrate makes them; on Citus each trigger fires on its shard.
        conn.execute("SET LOCAL check_function_bodies = off")
        for key in GUARD:
            if key in FUNCTIONS_AT_0021:
                conn.execute(FUNCTIONS_AT_0021[key])
        make_code(conn, [key for key in GUARD if key not in FUNCTIONS_AT_0021], citus_triggers=True)
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

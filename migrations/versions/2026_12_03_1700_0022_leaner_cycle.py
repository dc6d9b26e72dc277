"""A start+interrupt cycle's database work made smaller without losing a rule

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-03 17:00:00+00:00

``ix_workspaces_foreground`` goes: the foreground's key holds ``conversation_id`` since migration
0018, so the foreign-key check of a removed instance and history retention's look at the
workspace (``prune_instances``, ``prune_conversation``) find its one row by the primary key. The
index made every change of the foreground (two a cycle) a non-HOT update with two index entries,
and its predicate was prepared at each of the row's three updates (``bench.db_parts``: 77 k of a
cycle's 5.0 M instructions, bench/README.md).

``fk_operations_conversation_id_workspaces`` goes: an operation's workspace exists through its
instance, ``fk_operations_instance_id_app_instances`` (``instance_id`` and ``conversation_id`` are
NOT NULL) and ``fk_app_instances_conversation_id_workspaces``, both NO ACTION — no operation can
name a conversation without a workspace, and no workspace under an instance can go. The key checked
the same thing again at every operation's INSERT (about 40 k a cycle).

``instance_states``' two CHECKs (a non-negative revision, an object as data) go to
``instance_states_readonly_is_final`` (``service/db/sql/20_guards.sql``), which fires on INSERT as
well now: the same rules under the same names, compiled once per session instead of read back from
the catalog and prepared at the snapshot's INSERT and UPDATE (one of each a cycle). The trigger is
made first (from that file, recorded in ``database_code`` as migrate records it, so the database
code applied next leaves it as it is), then the CHECKs dropped: there is no moment without the rules.
``app_instances``' and ``sub_sessions``' two CHECKs each (the status, its time set exactly when
closed or ended) go the same way to two guards of their own, ``app_instances_guard`` and
``sub_sessions_guard``: a cycle inserts and updates one row of each.

One transaction, under the tables' locks taken together under a short ``lock_timeout`` tried
again until it succeeds, so the release still serving waits for a moment instead of failing.
"""

from __future__ import annotations

from collections.abc import Sequence

from service.db import code
from service.db.migration_steps import lock_tables, make_code, own_connection

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Locked together, in the order every use case writes them.
TABLES = ("workspaces", "app_instances", "sub_sessions", "instance_states", "operations")
GUARDS = (
    ("function", "app_instances_guard"),
    ("trigger", "app_instances.app_instances_guard"),
    ("function", "sub_sessions_guard"),
    ("trigger", "sub_sessions.sub_sessions_guard"),
    ("function", "instance_states_readonly_is_final"),
    ("trigger", "instance_states.instance_states_readonly_is_final"),
)
# The guards as service/db/sql/20_guards.sql held them until migration 0024, which gave their row
# rules back to CHECK constraints (a migration is history: it makes what it made).
GUARDS_AT_0022 = {
    ("function", "app_instances_guard"): r"""
CREATE OR REPLACE FUNCTION app_instances_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.status = 'open' AND NEW.closed_at IS NULL OR NEW.status = 'closed' AND NEW.closed_at IS NOT NULL THEN
        RETURN NEW;  -- both rules hold
    ELSIF NOT ((NEW.status = 'closed') = (NEW.closed_at IS NOT NULL)) THEN
        RAISE EXCEPTION 'new row for relation "app_instances" violates check constraint "%"',
            'ck_app_instances_closed_at_iff_closed'
            USING ERRCODE = 'check_violation', CONSTRAINT = 'ck_app_instances_closed_at_iff_closed',
                  TABLE = 'app_instances';
    ELSIF NOT (NEW.status = ANY ('{open,closed}'::text[])) THEN
        RAISE EXCEPTION 'new row for relation "app_instances" violates check constraint "%"',
            'ck_app_instances_status'
            USING ERRCODE = 'check_violation', CONSTRAINT = 'ck_app_instances_status',
                  TABLE = 'app_instances';
    END IF;
    RETURN NEW;
END $$;
""",
    ("trigger", "app_instances.app_instances_guard"): r"""
CREATE OR REPLACE TRIGGER app_instances_guard BEFORE INSERT OR UPDATE ON app_instances
FOR EACH ROW EXECUTE FUNCTION app_instances_guard();
""",
    ("function", "sub_sessions_guard"): r"""
CREATE OR REPLACE FUNCTION sub_sessions_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.status = 'open' AND NEW.ended_at IS NULL OR NEW.status = 'ended' AND NEW.ended_at IS NOT NULL THEN
        RETURN NEW;  -- both rules hold
    ELSIF NOT ((NEW.status = 'ended') = (NEW.ended_at IS NOT NULL)) THEN
        RAISE EXCEPTION 'new row for relation "sub_sessions" violates check constraint "%"',
            'ck_sub_sessions_ended_at_iff_ended'
            USING ERRCODE = 'check_violation', CONSTRAINT = 'ck_sub_sessions_ended_at_iff_ended',
                  TABLE = 'sub_sessions';
    ELSIF NOT (NEW.status = ANY ('{open,ended}'::text[])) THEN
        RAISE EXCEPTION 'new row for relation "sub_sessions" violates check constraint "%"',
            'ck_sub_sessions_status'
            USING ERRCODE = 'check_violation', CONSTRAINT = 'ck_sub_sessions_status',
                  TABLE = 'sub_sessions';
    END IF;
    RETURN NEW;
END $$;
""",
    ("trigger", "sub_sessions.sub_sessions_guard"): r"""
CREATE OR REPLACE TRIGGER sub_sessions_guard BEFORE INSERT OR UPDATE ON sub_sessions
FOR EACH ROW EXECUTE FUNCTION sub_sessions_guard();
""",
    ("function", "instance_states_readonly_is_final"): r"""
CREATE OR REPLACE FUNCTION instance_states_readonly_is_final() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        IF OLD.readonly THEN
            IF NOT NEW.readonly OR NEW.data IS DISTINCT FROM OLD.data OR NEW.revision <> OLD.revision THEN
                RAISE EXCEPTION 'snapshot of instance % is read-only', OLD.instance_id
                    USING ERRCODE = 'check_violation', CONSTRAINT = 'instance_state_readonly';
            END IF;
        END IF;
    END IF;
    IF jsonb_typeof(NEW.data) = 'object' AND NEW.revision >= 0 THEN
        RETURN NEW;  -- both rules hold
    ELSIF NOT (jsonb_typeof(NEW.data) = 'object') THEN
        RAISE EXCEPTION 'new row for relation "instance_states" violates check constraint "%"',
            'ck_instance_states_data_is_object'
            USING ERRCODE = 'check_violation', CONSTRAINT = 'ck_instance_states_data_is_object',
                  TABLE = 'instance_states';
    ELSIF NOT (NEW.revision >= 0) THEN
        RAISE EXCEPTION 'new row for relation "instance_states" violates check constraint "%"',
            'ck_instance_states_revision_nonnegative'
            USING ERRCODE = 'check_violation', CONSTRAINT = 'ck_instance_states_revision_nonnegative',
                  TABLE = 'instance_states';
    END IF;
    RETURN NEW;
END $$;
""",
}
STATEMENTS = (
    "DROP INDEX IF EXISTS ix_workspaces_foreground",
    "ALTER TABLE operations DROP CONSTRAINT IF EXISTS fk_operations_conversation_id_workspaces",
    "ALTER TABLE instance_states DROP CONSTRAINT IF EXISTS ck_instance_states_data_is_object,"
    " DROP CONSTRAINT IF EXISTS ck_instance_states_revision_nonnegative",
    "ALTER TABLE app_instances DROP CONSTRAINT IF EXISTS ck_app_instances_closed_at_iff_closed,"
    " DROP CONSTRAINT IF EXISTS ck_app_instances_status",
    "ALTER TABLE sub_sessions DROP CONSTRAINT IF EXISTS ck_sub_sessions_ended_at_iff_ended,"
    " DROP CONSTRAINT IF EXISTS ck_sub_sessions_status",
)


def upgrade() -> None:
    with own_connection() as conn, conn.transaction():
        lock_tables(conn, TABLES)
        # As migrate applies triggers on Citus (service/db/code.py): each fires on its shard.
        code.prepare(conn)
        for key in GUARDS:
            if key in GUARDS_AT_0022:
                conn.execute(GUARDS_AT_0022[key])
        make_code(conn, [key for key in GUARDS if key not in GUARDS_AT_0022], citus_triggers=True)
        for statement in STATEMENTS:
            conn.execute(statement)


def downgrade() -> None:
    raise NotImplementedError("forward-only migrations")

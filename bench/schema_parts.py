"""The parts ``bench.schema_cost`` drops and puts back: every trigger, index, foreign key, check
and generated column of the cycle's tables, the groups of them, and the reshapes (other forms of
the same protection) tried before anything is written."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from bench.schema_cycles import VARIANT, tables_sql
from harness.processes import ROOT


@dataclass
class Part:
    name: str
    kind: str
    drop: list[str]
    restore: list[str]


def discover(conn: psycopg.Connection[Any]) -> list[Part]:
    """Every trigger, non-primary index (with the constraint it backs), foreign key and table
    check on the cycle's tables, as parts that can be dropped and put back."""
    tables = tables_sql()
    parts: list[Part] = []
    for name, table, definition in conn.execute(
        "SELECT t.tgname, t.tgrelid::regclass::text, pg_get_triggerdef(t.oid) FROM pg_trigger t "
        f"WHERE NOT t.tgisinternal AND t.tgrelid::regclass::text IN {tables} ORDER BY 2, 1"
    ).fetchall():
        if name == "tool_calls_legacy_status":
            # The previous release's HTTP status, filled for it until the next contract step;
            # without the trigger the column must take NULL, and the rows get theirs back after.
            parts.append(
                Part(
                    f"trigger {name} (for the previous release)",
                    "trigger",
                    [
                        f"DROP TRIGGER {name} ON {table}",
                        f"ALTER TABLE {table} ALTER COLUMN status_code DROP NOT NULL",
                    ],
                    [
                        f"UPDATE {table} SET status_code = legacy_http_status("
                        "coalesce(response ->> 'status', response ->> 'error')) WHERE status_code IS NULL",
                        f"ALTER TABLE {table} ALTER COLUMN status_code SET NOT NULL",
                        definition,
                    ],
                )
            )
            continue
        parts.append(Part(f"trigger {name}", "trigger", [f"DROP TRIGGER {name} ON {table}"], [definition]))
    for index, table, definition, constraint, constraint_def in conn.execute(
        "SELECT i.indexrelid::regclass::text, i.indrelid::regclass::text, pg_get_indexdef(i.indexrelid), "
        "       c.conname, pg_get_constraintdef(c.oid) "
        "FROM pg_index i "
        "LEFT JOIN pg_constraint c ON c.conindid = i.indexrelid AND c.contype IN ('u', 'x') "
        "     AND c.conrelid = i.indrelid "
        f"WHERE NOT i.indisprimary AND i.indrelid::regclass::text IN {tables} ORDER BY 2, 1"
    ).fetchall():
        if constraint:
            parts.append(
                Part(
                    f"unique {constraint}",
                    "index",
                    [f"ALTER TABLE {table} DROP CONSTRAINT {constraint}"],
                    [f"ALTER TABLE {table} ADD CONSTRAINT {constraint} {constraint_def}"],
                )
            )
        else:
            parts.append(Part(f"index {index}", "index", [f"DROP INDEX {index}"], [definition]))
    for name, table, definition in conn.execute(
        "SELECT conname, conrelid::regclass::text, pg_get_constraintdef(oid) FROM pg_constraint "
        f"WHERE contype = 'f' AND conrelid::regclass::text IN {tables} ORDER BY 2, 1"
    ).fetchall():
        parts.append(
            Part(
                f"foreign key {name}",
                "foreign key",
                [f"ALTER TABLE {table} DROP CONSTRAINT {name}"],
                [f"ALTER TABLE {table} ADD CONSTRAINT {name} {definition}"],
            )
        )
    checks = conn.execute(
        "SELECT conname, conrelid::regclass::text, pg_get_constraintdef(oid) FROM pg_constraint "
        f"WHERE contype = 'c' AND conrelid::regclass::text IN {tables} ORDER BY 2, 1"
    ).fetchall()
    parts.append(
        Part(
            f"every check ({len(checks)})",
            "check",
            [f"ALTER TABLE {table} DROP CONSTRAINT {name}" for name, table, _ in checks],
            [f"ALTER TABLE {table} ADD CONSTRAINT {name} {definition}" for name, table, definition in checks],
        )
    )
    for table, column, expression in conn.execute(
        "SELECT table_name, column_name, generation_expression FROM information_schema.columns "
        f"WHERE is_generated = 'ALWAYS' AND table_name IN {tables}"
    ).fetchall():
        column_type = conn.execute(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
            "WHERE attrelid = %s::regclass AND attname = %s",
            (table, column),
        ).fetchone()
        assert column_type is not None
        parts.append(
            Part(
                f"generated column {table}.{column}",
                "generated",
                [f"ALTER TABLE {table} ALTER COLUMN {column} DROP EXPRESSION"],
                [
                    f"ALTER TABLE {table} DROP COLUMN {column}",
                    f"ALTER TABLE {table} ADD COLUMN {column} {column_type[0]} "
                    f"GENERATED ALWAYS AS ({expression}) STORED",
                ],
            )
        )
    return parts


def groups(parts: Sequence[Part]) -> list[Part]:
    """Parts taken together: every projection trigger; everything at once (the leanest schema
    the same writes can run on: primary keys only)."""

    def together(name: str, kind: str, chosen: Sequence[Part]) -> Part:
        # Dropped in the order given, put back in reverse.
        return Part(
            name,
            kind,
            [s for p in chosen for s in p.drop],
            [s for p in reversed(chosen) for s in p.restore],
        )

    projection = [p for p in parts if p.kind == "trigger" and p.name.startswith("trigger project_")]
    order = {"trigger": 0, "foreign key": 1, "index": 2, "check": 3, "generated": 4}
    everything = sorted(parts, key=lambda p: order[p.kind])
    return [
        together("every projection trigger", "group", projection),
        together("everything above (primary keys only)", "group", everything),
    ]


def reshapes(conn: psycopg.Connection[Any]) -> list[Part]:
    """Other forms of the same protection, and two probes, tried before anything is written:
    ``saved`` is what the form would save (negative: what it would add)."""

    def trigger(name: str) -> str:
        row = conn.execute(
            "SELECT pg_get_triggerdef(oid) FROM pg_trigger WHERE tgname = %s AND NOT tgisinternal", (name,)
        ).fetchone()
        assert row is not None, name
        return str(row[0])

    # operations_guard checks every row's rules (migration 0020), so only the snapshot's guard can
    # take a WHEN. Since migration 0022 that guard also holds instance_states' two former CHECKs, on
    # INSERT too: the WHEN variant below skips those as well, so its saving is an upper bound.
    readonly = trigger("instance_states_readonly_is_final")
    guarded = [
        "DROP TRIGGER instance_states_readonly_is_final ON instance_states",
        "CREATE TRIGGER instance_states_readonly_is_final BEFORE UPDATE ON instance_states FOR EACH ROW "
        "WHEN (OLD.readonly) EXECUTE FUNCTION instance_states_readonly_is_final()",
    ]
    unguarded = [
        "DROP TRIGGER instance_states_readonly_is_final ON instance_states",
        readonly,
    ]
    noop = [
        "CREATE FUNCTION bench_noop() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$",
        "CREATE TRIGGER bench_noop AFTER INSERT OR UPDATE ON operations FOR EACH ROW "
        "EXECUTE FUNCTION bench_noop()",
        "CREATE TRIGGER bench_noop AFTER UPDATE ON workspaces FOR EACH ROW EXECUTE FUNCTION bench_noop()",
    ]
    # The ids the Runtime makes as they were before 15_ids.sql: random UUIDs (version 4) instead
    # of time-ordered ones, in every function that makes one.
    makers = conn.execute(
        "SELECT p.proname, pg_get_functiondef(p.oid) FROM pg_proc p "
        "WHERE p.pronamespace = 'public'::regnamespace AND p.proname <> 'uuid_v7' "
        "AND p.prosrc LIKE '%uuid_v7()%' ORDER BY 1"
    ).fetchall()
    assert makers, "no function makes a time-ordered id"
    random_ids = [str(definition).replace("uuid_v7()", "gen_random_uuid()") for _, definition in makers]
    time_ordered = [str(definition) for _, definition in makers]

    settle = conn.execute("SELECT pg_get_functiondef('settle_focusing'::regproc)").fetchone()
    assert settle is not None
    one_statement = _settle_in_one_statement()
    earlier = (
        [
            Part(
                "before: settle_focusing in one statement (the form of release 747472a)",
                "reshape",
                [one_statement],
                [str(settle[0])],
            )
        ]
        if one_statement
        else []
    )

    return [
        *earlier,
        Part(
            "server: wal_compression = lz4 (full-page images compressed)",
            "setting",
            [f"ALTER DATABASE {VARIANT} SET wal_compression = 'lz4'"],
            [f"ALTER DATABASE {VARIANT} RESET wal_compression"],
        ),
        Part(
            "before: random ids (UUID version 4) for instances, sub-sessions, operations, events",
            "reshape",
            random_ids,
            time_ordered,
        ),
        Part(
            "reshape: outbox fillfactor 90 (a claim can stay on its page)",
            "reshape",
            ["ALTER TABLE outbox SET (fillfactor = 90)"],
            ["ALTER TABLE outbox RESET (fillfactor)"],
        ),
        Part(
            "reshape: sub_sessions, instance_states fillfactor 90",
            "reshape",
            [
                "ALTER TABLE sub_sessions SET (fillfactor = 90)",
                "ALTER TABLE instance_states SET (fillfactor = 90)",
            ],
            ["ALTER TABLE sub_sessions RESET (fillfactor)", "ALTER TABLE instance_states RESET (fillfactor)"],
        ),
        Part("reshape: guard triggers called only for final rows (WHEN)", "reshape", guarded, unguarded),
        Part(
            "reshape: projection_events keyed by (conversation_id, event_seq) alone",
            "reshape",
            ["ALTER TABLE projection_events DROP CONSTRAINT pk_projection_events"],
            ["ALTER TABLE projection_events ADD CONSTRAINT pk_projection_events PRIMARY KEY (event_seq)"],
        ),
        Part(
            "probe: one no-op row trigger more on operations and workspaces",
            "probe",
            noop,
            [
                "DROP TRIGGER bench_noop ON operations",
                "DROP TRIGGER bench_noop ON workspaces",
                "DROP FUNCTION bench_noop()",
            ],
        ),
    ]


PREVIOUS_RELEASE = "747472aefc1f1acb27e84a2033d3034bc9c60819"
_PREVIOUS_SETTLE = "migrations/versions/2026_12_01_0100_0005_tool_calls_in_one_round_trip.py"


def _settle_in_one_statement() -> str | None:
    """settle_focusing as release 747472a wrote it — the operation, the instance's closing, the
    foreground, the sequence and the outbox row in one statement of data-modifying CTEs — read from
    git at that commit (None without it), with today's id function."""
    shown = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{PREVIOUS_RELEASE}:{_PREVIOUS_SETTLE}"],
        capture_output=True,
        text=True,
        check=False,
    )
    found = re.search(r'SETTLE_CTES = """(.*?)"""', shown.stdout, re.DOTALL)
    if shown.returncode != 0 or found is None:
        return None
    ctes = found.group(1).replace("gen_random_uuid()", "uuid_v7()")
    return f"""
CREATE OR REPLACE FUNCTION settle_focusing(
    p_operation_ids uuid[], p_state text, p_reason text, p_only_due boolean DEFAULT false)
RETURNS SETOF settled_operation
LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY
    WITH {ctes}
    SELECT s.operation_id, s.conversation_id, s.instance_id, s.state, s.reason, s.ends_at,
           s.finalized_at, s.lateness_ms, q.event_id
    FROM settled s JOIN queued q USING (operation_id);
END $$"""

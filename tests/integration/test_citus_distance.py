"""How far the schema stands from a Citus deployment distributed by conversation_id (docs/scaling.md).

Citus accepts a primary key, a unique constraint or index, and a foreign key between distributed
tables only when it includes the distribution column. ``PLAN`` gives every table its place on Citus
and names each of its keys and foreign keys that does not include ``conversation_id`` yet: that is
the distance, and docs/scaling.md lists the same names. A table, key or foreign key added without
``conversation_id`` fails these tests until it is entered here and in docs/scaling.md, so the
distance is measured and never grows unnoticed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SCALING = ROOT / "docs" / "scaling.md"

DISTRIBUTED = "distributed by conversation_id"
OWN_KEY = "distributed by its own key, co-located with nothing"
REFERENCE = "reference table (small, copied to every node)"
COORDINATOR = "kept on the coordinator (the schema's own bookkeeping)"


@dataclass(frozen=True)
class Place:
    """A table's place on Citus and its distance from it."""

    kind: str
    # Keys (primary, unique constraints, unique indexes) whose columns lack conversation_id.
    keys: frozenset[str] = frozenset()
    # Foreign keys to distributed tables whose columns lack conversation_id.
    foreign_keys: frozenset[str] = frozenset()
    # The table has no conversation_id column yet.
    needs_column: bool = False


def _place(
    kind: str, keys: tuple[str, ...] = (), foreign_keys: tuple[str, ...] = (), needs_column: bool = False
) -> Place:
    return Place(kind, frozenset(keys), frozenset(foreign_keys), needs_column)


PLAN: dict[str, Place] = {
    "workspaces": _place(DISTRIBUTED, foreign_keys=("fk_workspaces_foreground_instance_id_app_instances",)),
    "app_instances": _place(DISTRIBUTED, keys=("pk_app_instances",)),
    "sub_sessions": _place(
        DISTRIBUTED,
        keys=("pk_sub_sessions", "uq_sub_sessions_instance_id"),
        foreign_keys=("fk_sub_sessions_instance_id_app_instances",),
    ),
    "instance_states": _place(
        DISTRIBUTED,
        keys=("pk_instance_states",),
        foreign_keys=("fk_instance_states_instance_id_app_instances",),
        needs_column=True,
    ),
    "operations": _place(
        DISTRIBUTED,
        keys=("pk_operations", "uq_operations_tool_call_id"),
        foreign_keys=("fk_operations_instance_id_app_instances",),
    ),
    "tool_calls": _place(DISTRIBUTED, keys=("pk_tool_calls",)),
    "outbox": _place(
        DISTRIBUTED,
        keys=("pk_outbox", "uq_outbox_tool_call_id"),
        foreign_keys=("fk_outbox_operation_id_operations",),
    ),
    "outbox_attempts": _place(
        DISTRIBUTED,
        keys=("pk_outbox_attempts", "uq_outbox_attempts_event_id_attempt"),
        foreign_keys=("fk_outbox_attempts_event_id_outbox",),
        needs_column=True,
    ),
    "capabilities": _place(
        DISTRIBUTED,
        keys=("pk_capabilities",),
        foreign_keys=("fk_capabilities_instance_id_app_instances",),
    ),
    "surface_events": _place(
        DISTRIBUTED,
        keys=("pk_surface_events",),
        foreign_keys=("fk_surface_events_instance_id_app_instances",),
        needs_column=True,
    ),
    "messages": _place(
        DISTRIBUTED,
        keys=("pk_messages",),
        foreign_keys=("fk_messages_sub_session_id_sub_sessions",),
    ),
    "interactions": _place(
        DISTRIBUTED,
        keys=("pk_interactions",),
        foreign_keys=("fk_interactions_asked_in_sub_session_id_sub_sessions",),
    ),
    "interaction_tasks": _place(
        DISTRIBUTED,
        keys=("pk_interaction_tasks", "uq_interaction_tasks_tool_call_id"),
        foreign_keys=("fk_interaction_tasks_tool_call_id_interactions",),
        needs_column=True,
    ),
    "projection_events": _place(DISTRIBUTED, keys=("pk_projection_events",)),
    "host_sessions": _place(OWN_KEY),
    "console_sessions": _place(REFERENCE),
    "delivery_endpoints": _place(REFERENCE),
    "outbox_retention": _place(REFERENCE),
    "outbox_tallies": _place(OWN_KEY),
    "write_allowances": _place(OWN_KEY),
    "history_retention": _place(REFERENCE),
    "database_code": _place(COORDINATOR),
}

TABLES = """
SELECT c.relname AS name,
       EXISTS (SELECT 1 FROM pg_attribute a
               WHERE a.attrelid = c.oid AND a.attname = 'conversation_id' AND NOT a.attisdropped)
           AS has_conversation_id
FROM pg_class c
WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p') AND c.relname <> 'alembic_version'
"""

# Primary keys, unique constraints and unique indexes (partial ones too), with their columns.
UNIQUE_KEYS = """
SELECT t.relname AS table_name, i.relname AS key_name,
       array_agg(a.attname::text ORDER BY k.ord) FILTER (WHERE a.attname IS NOT NULL) AS columns
FROM pg_index x
JOIN pg_class t ON t.oid = x.indrelid
JOIN pg_class i ON i.oid = x.indexrelid
CROSS JOIN LATERAL unnest(x.indkey) WITH ORDINALITY AS k(attnum, ord)
LEFT JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum
WHERE x.indisunique AND t.relnamespace = 'public'::regnamespace AND t.relname <> 'alembic_version'
GROUP BY 1, 2
"""

FOREIGN_KEYS = """
SELECT c.conrelid::regclass::text AS table_name, c.conname AS key_name,
       c.confrelid::regclass::text AS referenced,
       ARRAY(SELECT a.attname::text FROM pg_attribute a
             WHERE a.attrelid = c.conrelid AND a.attnum = ANY (c.conkey)) AS columns
FROM pg_constraint c
WHERE c.contype = 'f' AND c.connamespace = 'public'::regnamespace
"""


def _by_table(rows: list[dict[str, Any]], wanted: Any) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {name: set() for name in PLAN}
    for row in rows:
        if wanted(row):
            found.setdefault(row["table_name"], set()).add(row["key_name"])
    return found


def test_every_table_has_its_place_in_the_citus_plan(db: Any) -> None:
    tables = {row["name"] for row in db.execute(TABLES).fetchall()}
    assert tables == set(PLAN)


def test_the_distributed_tables_that_lack_a_conversation_id_column_are_the_known_ones(db: Any) -> None:
    lacking = {row["name"] for row in db.execute(TABLES).fetchall() if not row["has_conversation_id"]}
    planned = {name for name, place in PLAN.items() if place.kind == DISTRIBUTED and place.needs_column}
    apart = {name for name, place in PLAN.items() if place.kind != DISTRIBUTED}
    assert lacking - apart == planned


def test_keys_without_conversation_id_are_the_known_distance(db: Any) -> None:
    keys = db.execute(UNIQUE_KEYS).fetchall()
    distributed = {name for name, place in PLAN.items() if place.kind == DISTRIBUTED}
    found = _by_table(
        keys, lambda row: row["table_name"] in distributed and "conversation_id" not in (row["columns"] or [])
    )
    assert found == {name: set(place.keys) for name, place in PLAN.items()}


def test_foreign_keys_without_conversation_id_are_the_known_distance(db: Any) -> None:
    distributed = {name for name, place in PLAN.items() if place.kind == DISTRIBUTED}
    found = _by_table(
        db.execute(FOREIGN_KEYS).fetchall(),
        lambda row: row["referenced"] in distributed and "conversation_id" not in row["columns"],
    )
    assert found == {name: set(place.foreign_keys) for name, place in PLAN.items()}


def test_docs_scaling_names_every_table_and_every_step_of_the_distance() -> None:
    text = SCALING.read_text()
    missing = [name for name in PLAN if f"`{name}`" not in text]
    for place in PLAN.values():
        missing += [key for key in (*place.keys, *place.foreign_keys) if f"`{key}`" not in text]
    assert missing == []

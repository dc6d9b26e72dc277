"""The migrated schema is distributable by conversation_id on Citus (docs/scaling.md), as
``python -m service distribute`` places it: every table has its place, and every key Citus checks
includes the distribution column. ``make citus`` distributes it on a real cluster; these tests keep
a table or key added on plain PostgreSQL from breaking that unnoticed.

Citus accepts a primary key, a unique constraint or index on a distributed table, and a foreign key
between distributed tables, only when it includes the distribution column.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from service.db import distribute

ROOT = Path(__file__).resolve().parents[2]
SCALING = ROOT / "docs" / "scaling.md"

BY_CONVERSATION = set(distribute.BY_CONVERSATION)
OWN_KEY = dict(distribute.OWN_KEY)
PLACED = BY_CONVERSATION | set(distribute.REFERENCE) | set(OWN_KEY) | set(distribute.COORDINATOR)

TABLES = """
SELECT c.relname AS name,
       EXISTS (SELECT 1 FROM pg_attribute a
               WHERE a.attrelid = c.oid AND a.attname = 'conversation_id' AND NOT a.attisdropped
                 AND a.attnotnull) AS has_conversation_id
FROM pg_class c
WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p')
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
WHERE x.indisunique AND t.relnamespace = 'public'::regnamespace
GROUP BY 1, 2
"""

# Foreign keys with their columns and the columns they reference, pair by pair.
FOREIGN_KEYS = """
SELECT c.conrelid::regclass::text AS table_name, c.conname AS key_name,
       c.confrelid::regclass::text AS referenced,
       ARRAY(SELECT a.attname::text || '=' || r.attname::text
             FROM unnest(c.conkey, c.confkey) AS k(col, ref)
             JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.col
             JOIN pg_attribute r ON r.attrelid = c.confrelid AND r.attnum = k.ref) AS pairs
FROM pg_constraint c
WHERE c.contype = 'f' AND c.connamespace = 'public'::regnamespace
"""


def test_every_table_has_its_place_on_citus(db: Any) -> None:
    tables = {row["name"] for row in db.execute(TABLES).fetchall()}
    assert tables == PLACED


def test_every_table_of_conversation_data_has_a_not_null_conversation_id(db: Any) -> None:
    having = {row["name"] for row in db.execute(TABLES).fetchall() if row["has_conversation_id"]}
    assert having >= BY_CONVERSATION


def test_every_key_of_a_distributed_table_includes_its_distribution_column(db: Any) -> None:
    column_of = {**dict.fromkeys(BY_CONVERSATION, "conversation_id"), **OWN_KEY}
    lacking = [
        f"{row['table_name']}.{row['key_name']}"
        for row in db.execute(UNIQUE_KEYS).fetchall()
        if row["table_name"] in column_of and column_of[row["table_name"]] not in (row["columns"] or [])
    ]
    assert lacking == []


def test_every_foreign_key_between_conversation_tables_pairs_their_conversation_ids(db: Any) -> None:
    lacking = [
        f"{row['table_name']}.{row['key_name']}"
        for row in db.execute(FOREIGN_KEYS).fetchall()
        if row["table_name"] in BY_CONVERSATION
        and row["referenced"] in BY_CONVERSATION
        and "conversation_id=conversation_id" not in row["pairs"]
    ]
    assert lacking == []


def test_foreign_keys_reach_only_tables_that_citus_can_pair_them_with(db: Any) -> None:
    """A distributed table may reference a co-located one or a reference table; a reference table
    references only reference tables; the coordinator's own tables take part in none."""
    reference = set(distribute.REFERENCE)
    refused = []
    for row in db.execute(FOREIGN_KEYS).fetchall():
        source, target = row["table_name"], row["referenced"]
        fine = (source in BY_CONVERSATION and target in BY_CONVERSATION | reference) or (
            source in reference and target in reference
        )
        if not fine:
            refused.append(f"{source}.{row['key_name']} -> {target}")
    assert refused == []


def test_docs_scaling_names_every_table_and_its_place() -> None:
    text = SCALING.read_text()
    assert [name for name in sorted(PLACED - {"alembic_version"}) if f"`{name}`" not in text] == []

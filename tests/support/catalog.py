"""A database's schema as text, object by object, to compare two databases.

Every table column (type, nullability, default, identity, generation), constraint, index (with its
predicate), trigger, function (``pg_get_functiondef``), view and composite type of the public schema,
keyed by what it is, so that a difference names the object.
"""

from __future__ import annotations

from typing import Any

import psycopg

_OBJECTS = """
SELECT 'column ' || c.relname || '.' || a.attname,
       concat_ws(' ', format_type(a.atttypid, a.atttypmod), CASE WHEN a.attnotnull THEN 'NOT NULL' END,
                 'DEFAULT ' || pg_get_expr(d.adbin, d.adrelid), 'IDENTITY ' || nullif(a.attidentity::text, ''),
                 'GENERATED ' || nullif(a.attgenerated::text, ''))
FROM pg_attribute a
JOIN pg_class c ON c.oid = a.attrelid
LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p') AND a.attnum > 0
  AND NOT a.attisdropped
UNION ALL
SELECT 'constraint ' || conrelid::regclass::text || '.' || conname, pg_get_constraintdef(oid)
FROM pg_constraint
WHERE connamespace = 'public'::regnamespace AND conrelid <> 0
UNION ALL
SELECT 'index ' || i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid)
FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid
WHERE c.relnamespace = 'public'::regnamespace
UNION ALL
SELECT 'trigger ' || t.tgrelid::regclass::text || '.' || t.tgname, pg_get_triggerdef(t.oid)
FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
WHERE c.relnamespace = 'public'::regnamespace AND NOT t.tgisinternal
UNION ALL
SELECT 'function ' || p.oid::regprocedure::text, pg_get_functiondef(p.oid)
FROM pg_proc p
WHERE p.pronamespace = 'public'::regnamespace
UNION ALL
SELECT 'view ' || viewname, pg_get_viewdef(format('%I', viewname)::regclass)
FROM pg_views WHERE schemaname = 'public'
UNION ALL
SELECT 'type ' || t.typname,
       string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod), ', ' ORDER BY a.attnum)
FROM pg_type t JOIN pg_class c ON c.oid = t.typrelid JOIN pg_attribute a ON a.attrelid = c.oid
WHERE t.typnamespace = 'public'::regnamespace AND c.relkind = 'c' AND a.attnum > 0
GROUP BY t.typname
"""

# Migrations' own bookkeeping, not part of the schema they make.
_IGNORED = ("alembic_version",)


def catalog(url: str) -> dict[str, str]:
    with psycopg.connect(url) as conn:
        rows: list[tuple[Any, ...]] = conn.execute(_OBJECTS).fetchall()
    return {
        str(name): str(definition)
        for name, definition in rows
        if not any(f" {table}" in name or f" {table}." in name for table in _IGNORED)
    }


def differences(left: dict[str, str], right: dict[str, str]) -> list[str]:
    """What one side has that the other has not, or has otherwise: one line per object."""
    lines = [f"only in the first: {name}" for name in sorted(left.keys() - right.keys())]
    lines += [f"only in the second: {name}" for name in sorted(right.keys() - left.keys())]
    lines += [
        f"differs: {name}\n  {left[name]!r}\n  {right[name]!r}"
        for name in sorted(left.keys() & right.keys())
        if left[name] != right[name]
    ]
    return lines

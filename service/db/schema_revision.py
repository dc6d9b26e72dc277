"""Whether a database serves this release: its migration revision and the interface its code serves.

The revisions this release knows are read from ``migrations/versions`` with ``ast`` rather than
Alembic's ``ScriptDirectory``: ``serve`` and the relay ask at every ``/readyz``, and importing Alembic
(and SQLAlchemy under it) cost ``serve`` about 0.6 s of its start for two module-level assignments
per file. ``tests/unit/test_schema_revision.py`` holds the answers equal to Alembic's.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import tuple_row

from service.db import code

VERSIONS = Path(__file__).resolve().parents[2] / "migrations" / "versions"


def _assigned(path: Path) -> dict[str, Any]:
    """The module-level ``revision`` and ``down_revision`` of a migration file."""
    found: dict[str, Any] = {}
    for node in ast.parse(path.read_text(encoding="utf-8"), str(path)).body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            name, value = node.target.id, node.value
        elif (
            isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
        ):
            name, value = node.targets[0].id, node.value
        else:
            continue
        if name in ("revision", "down_revision"):
            found[name] = ast.literal_eval(value)
    return found


@functools.cache
def revisions() -> dict[str, tuple[str, ...]]:
    """Each revision this release knows, with the revisions it follows."""
    known: dict[str, tuple[str, ...]] = {}
    for path in sorted(VERSIONS.glob("*.py")):
        assigned = _assigned(path)
        if "revision" not in assigned:
            continue
        down = assigned.get("down_revision")
        known[assigned["revision"]] = (
            () if down is None else (down,) if isinstance(down, str) else tuple(down)
        )
    return known


@functools.cache
def head_revision() -> str:
    """The one revision no other follows (``alembic heads``)."""
    known = revisions()
    followed = {down for downs in known.values() for down in downs}
    heads = sorted(set(known) - followed)
    if len(heads) != 1:
        raise RuntimeError(f"migrations/versions has {len(heads)} heads, not one: {heads}")
    return heads[0]


_SCHEMA = """
SELECT (SELECT version_num FROM alembic_version) AS revision,
       to_regprocedure('database_interfaces()') IS NOT NULL AS declares_interfaces
"""


async def schema_problem(conn: AsyncConnection[Any]) -> str | None:
    """Why this release cannot run against ``conn``'s database now, or None when it can.

    It can when the database is at this release's head — or at a later release's (a revision this
    release does not know), which keeps serving the release before it during a rolling upgrade — and
    its code serves this release's interface (``service.db.code.INTERFACE``).
    """
    cursor = conn.cursor(row_factory=tuple_row)
    await cursor.execute(_SCHEMA)
    row = await cursor.fetchone()
    revision, declares = (row[0], row[1]) if row else (None, False)
    head = head_revision()
    if revision != head and (revision is None or revision in revisions()):
        return f"migrations at {revision}, head is {head}: run migrate"
    if not declares:
        return f"the database code at {revision} does not say which releases it serves: run migrate"
    await cursor.execute("SELECT %s = ANY(database_interfaces())", (code.INTERFACE,))
    served = await cursor.fetchone()
    if not (served and served[0]):
        return f"the database at {revision} no longer serves interface {code.INTERFACE} of this release"
    return None

"""Run the Alembic migrations, and tell whether a database serves this release."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from psycopg import AsyncConnection
from psycopg.rows import tuple_row

from service.db import code, roles
from service.db.urls import sqlalchemy_url

_ROOT = Path(__file__).resolve().parents[2]


def alembic_config(url: str) -> Config:
    config = Config(str(_ROOT / "alembic.ini"))
    config.set_main_option("script_location", str(_ROOT / "migrations"))
    # SQLAlchemy cannot parse libpq's host list (h1:5432,h2:5432): several hosts go as host=
    # parameters. ConfigParser interpolation: a literal % must be doubled.
    config.set_main_option("sqlalchemy.url", sqlalchemy_url(url).replace("%", "%%"))
    return config


def upgrade(url: str, names: roles.Names | None = None) -> roles.Outcome:
    """``alembic upgrade head`` against ``url``; in the same transaction, the privileges of the
    database roles (``names``, the defaults unless given) that exist are brought in line with the
    grants map (``service.db.roles.grant``). Answers what that changed."""
    config = alembic_config(url)
    config.attributes["role_names"] = names or roles.Names()
    command.upgrade(config, "head")
    outcome = config.attributes.get("roles_outcome")
    return outcome if isinstance(outcome, roles.Outcome) else roles.Outcome()


@functools.cache
def head_revision() -> str:
    script = ScriptDirectory.from_config(alembic_config("postgresql://unused"))
    head = script.get_current_head()
    assert head is not None
    return head


@functools.cache
def _revisions() -> frozenset[str]:
    script = ScriptDirectory.from_config(alembic_config("postgresql://unused"))
    return frozenset(revision.revision for revision in script.walk_revisions())


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
    if revision != head and (revision is None or revision in _revisions()):
        return f"migrations at {revision}, head is {head}: run migrate"
    if not declares:
        return f"the database code at {revision} does not say which releases it serves: run migrate"
    await cursor.execute("SELECT %s = ANY(database_interfaces())", (code.INTERFACE,))
    served = await cursor.fetchone()
    if not (served and served[0]):
        return f"the database at {revision} no longer serves interface {code.INTERFACE} of this release"
    return None

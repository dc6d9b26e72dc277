"""``python -m service distribute``: the migrated schema spread over a Citus cluster
(``service.db.distribute``); run on the coordinator after each ``migrate``."""

from __future__ import annotations

import sys

import psycopg

from service.cli.migrate import wait_for_database
from service.db.distribute import NotCitusError, distribute
from service.db.migrate import head_revision
from service.settings import load_settings


def run() -> int:
    settings = load_settings("migrate")
    wait_for_database(settings)
    with psycopg.connect(settings.psycopg_url, autocommit=True) as conn:
        row = (
            conn.execute("SELECT version_num FROM alembic_version").fetchone()
            if _has_versions(conn)
            else None
        )
        if row is None or row[0] != head_revision():
            print(
                f"distribute: the schema is at {row[0] if row else 'nothing'}, not {head_revision()}:"
                " run migrate first; nothing was changed",
                file=sys.stderr,
            )
            return 2
        try:
            outcome = distribute(conn)
        except NotCitusError as why:
            print(f"distribute: {why}", file=sys.stderr)
            return 2
    for change in outcome.changes:
        print(f"distribute: {change}", file=sys.stderr)
    print("distributed" if outcome.changes else "distributed already: nothing to do")
    return 0


def _has_versions(conn: psycopg.Connection[tuple[object, ...]]) -> bool:
    row = conn.execute("SELECT to_regclass('alembic_version') IS NOT NULL").fetchone()
    return bool(row and row[0])

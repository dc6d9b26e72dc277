"""``python -m service distribute``: the migrated schema spread over a Citus cluster
(``service.db.distribute``); run on the coordinator after each ``migrate``.

With ``--coordinator HOST:PORT`` and ``--worker HOST:PORT`` (repeatable) it first names the
coordinator and adds each worker not yet in the cluster's metadata (``citus_set_coordinator_host``,
``citus_add_node``), waiting for each worker to take connections: what a compose stack needs."""

from __future__ import annotations

import argparse
import sys
import time

import psycopg

from service.cli.migrate import wait_for_database
from service.db.distribute import NotCitusError, distribute
from service.db.schema_revision import head_revision
from service.settings import load_settings

DESCRIPTION = __doc__


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--coordinator", metavar="HOST:PORT", help="the coordinator as the workers reach it")
    parser.add_argument(
        "--worker", metavar="HOST:PORT", action="append", default=[], help="a worker to add (repeatable)"
    )


def _address(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    return (host, int(port)) if host else (value, 5432)


Conn = psycopg.Connection[tuple[object, ...]]


def _add_nodes(conn: Conn, coordinator: str | None, workers: list[str]) -> None:
    if coordinator:
        conn.execute("SELECT citus_set_coordinator_host(%s, %s)", _address(coordinator))
    known = {
        (str(h), int(str(p)))
        for h, p in conn.execute("SELECT nodename, nodeport FROM pg_dist_node").fetchall()
    }
    for worker in workers:
        host, port = _address(worker)
        if (host, port) in known:
            continue
        deadline = time.monotonic() + 120
        while True:
            try:
                conn.execute("SELECT citus_add_node(%s, %s)", (host, port))
                break
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                print(f"distribute: worker {host}:{port} not reachable yet; trying again", file=sys.stderr)
                time.sleep(2)
        print(f"distribute: added worker {host}:{port}", file=sys.stderr)


def run(args: argparse.Namespace | None = None) -> int:
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
            if args is not None and (args.coordinator or args.worker):
                _add_nodes(conn, args.coordinator, args.worker)
            outcome = distribute(conn)
        except NotCitusError as why:
            print(f"distribute: {why}", file=sys.stderr)
            return 2
    for change in outcome.changes:
        print(f"distribute: {change}", file=sys.stderr)
    print("distributed" if outcome.changes else "distributed already: nothing to do")
    return 0


def _has_versions(conn: Conn) -> bool:
    row = conn.execute("SELECT to_regclass('alembic_version') IS NOT NULL").fetchone()
    return bool(row and row[0])

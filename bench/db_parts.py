"""What each part of the schema costs a start+interrupt cycle in database instructions: the parts
``bench.schema_parts`` finds (every trigger, index, foreign key, the checks) dropped one at a time
from a copy of this checkout's migrated database, each copy counted as ``bench.db_instructions``
counts (callgrind, single-user backend), beside the unchanged copy in the same run.

    .venv/bin/python -m bench.db_parts [--cycles 100] [--only SUBSTRING ...] [--sql NAME=STATEMENT;...]

A part whose absence makes a call fail (a key an ``ON CONFLICT`` needs) is printed as such. On
empty tables: what a part costs in instructions, not what it saves a query on a history (that is
``bench.schema_cost``'s business)."""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import tempfile
from pathlib import Path

import psycopg

from bench.db_instructions import cycle_instructions, has_tools, throwaway_server
from bench.schema_parts import Part, discover, groups
from harness.processes import ROOT
from harness.releases import migrate_release


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cycles", type=int, default=100)
    parser.add_argument("--only", nargs="*", default=[], help="parts whose name contains one of these")
    parser.add_argument(
        "--sql", action="append", default=[], help="NAME=STATEMENT;STATEMENT: a variant of one's own"
    )
    args = parser.parse_args()
    if not has_tools():
        print("needs valgrind and PostgreSQL 15's server binaries")
        return 2
    work = Path(tempfile.mkdtemp(prefix="lineup-db-parts-"))
    os.chmod(work, 0o777)  # noqa: S103 - the server, run as postgres, writes its profiles here
    port = 55900 + os.getpid() % 90
    with contextlib.ExitStack() as cleanup:
        cleanup.callback(shutil.rmtree, work, ignore_errors=True)
        variants: list[tuple[str, str]] = [("unchanged", "v0")]
        with throwaway_server(work, port) as data:
            base = f"postgresql://postgres@127.0.0.1:{port}/postgres"
            with psycopg.connect(base, autocommit=True) as conn:
                conn.execute("CREATE DATABASE v0")
            migrate_release(ROOT, f"postgresql://postgres@127.0.0.1:{port}/v0")
            with psycopg.connect(f"postgresql://postgres@127.0.0.1:{port}/v0", autocommit=True) as conn:
                found = discover(conn)
            parts: list[Part] = [*found, *groups(found)]
            for spec in args.sql:
                name, _, statements = spec.partition("=")
                parts.append(Part(name, "own", [s for s in statements.split(";") if s.strip()], []))
            if args.only:
                parts = [p for p in parts if any(o in p.name for o in args.only)]
            for n, part in enumerate(parts, 1):
                with psycopg.connect(base, autocommit=True) as conn:
                    conn.execute(f"CREATE DATABASE v{n} TEMPLATE v0")
                with psycopg.connect(f"postgresql://postgres@127.0.0.1:{port}/v{n}", autocommit=True) as conn:
                    for statement in part.drop:
                        conn.execute(statement)
                variants.append((part.name, f"v{n}"))
        baseline = cycle_instructions(data, "v0", args.cycles, work)
        print(f"database instructions per start+interrupt cycle ({args.cycles} cycles), parts dropped:")
        print(f"    {'unchanged':<60} {baseline:>12,.0f}")
        sys.stdout.flush()
        for name, database in variants[1:]:
            try:
                figure = cycle_instructions(data, database, args.cycles, work)
            except RuntimeError as failed:
                print(f"    {name:<60} {'calls fail':>12}  ({str(failed).splitlines()[-1][:80]})")
            else:
                print(f"    {name:<60} {figure:>12,.0f}  saves {baseline - figure:>10,.0f}")
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())

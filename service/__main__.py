"""``python -m service migrate | distribute | roles | serve | dev | ops``."""

from __future__ import annotations

import argparse
import os
import sys

from service import dev_env
from service.cli import distribute as distribute_cli
from service.cli import ops as ops_cli
from service.cli import roles as roles_cli
from service.logging import configure_logging
from service.settings import SettingsError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m service", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("migrate", help="alembic upgrade head against DATABASE_URL")
    distribute = commands.add_parser(
        "distribute",
        help="spread the migrated schema over a Citus cluster (on its coordinator, after migrate)",
        description=distribute_cli.DESCRIPTION,
    )
    distribute_cli.add_arguments(distribute)
    roles = commands.add_parser(
        "roles",
        help="create or update the database roles and their grants (run as an admin)",
        description=roles_cli.DESCRIPTION,
    )
    roles_cli.add_arguments(roles)
    serve = commands.add_parser("serve", help="the HTTP service and the deadline sweeper")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--no-sweeper", action="store_true", help="leave deadlines to other replicas")
    dev = commands.add_parser("dev", help="everything on one machine, embedded Postgres if needed")
    dev.add_argument("--host", default="127.0.0.1")
    dev.add_argument("--port", type=int, default=8000)
    dev.add_argument("--data-dir", default=".dev", help="where dev keeps its Postgres and tokens")
    ops = commands.add_parser(
        "ops", help="operator CLI: outbox, operations, stats, trace", description=ops_cli.DESCRIPTION
    )
    ops_cli.add_arguments(ops)
    args = parser.parse_args(argv)
    if args.command != "dev" and (found := dev_env.adopt(os.environ)) is not None:
        print(dev_env.note(found), file=sys.stderr)
    try:
        if args.command == "migrate":
            from service.cli.migrate import run as run_migrate

            return run_migrate()
        if args.command == "distribute":
            return distribute_cli.run(args)
        if args.command == "roles":
            return roles_cli.run(args)
        if args.command == "serve":
            from service.cli.serve import run as run_serve

            return run_serve(args.host, args.port, sweeper=not args.no_sweeper)
        if args.command == "dev":
            from service.cli.dev import run as run_dev

            return run_dev(args.host, args.port, args.data_dir)
        if args.command == "ops":
            # A write's log line goes, as the ops API's does, to stderr as JSON: stdout is the answer.
            configure_logging()
            return ops_cli.run(args)
    except SettingsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    parser.error(f"unknown command {args.command}")
    return 2


if __name__ == "__main__":
    sys.exit(main())

"""``python -m service migrate | distribute | roles | serve | dev | ops | settings``."""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from service import dev_env
from service.settings import SettingsError
from service.version import __version__


def _command_named(argv: list[str]) -> str | None:
    """The command ``argv`` names: the first word not an option (the top-level parser has no option
    but --help, which takes no value)."""
    return next((arg for arg in argv if not arg.startswith("-")), None)


def _command(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], named: str | None, name: str, help: str
) -> None:
    """The subcommand ``name`` of ``service/cli/<name>.py``: its module imported, and its description and
    arguments added, only when it is the command named; otherwise a line in the list."""
    if named != name:
        commands.add_parser(name, help=help)
        return
    cli = importlib.import_module(f"service.cli.{name}")
    cli.add_arguments(commands.add_parser(name, help=help, description=cli.DESCRIPTION))


def main(argv: list[str] | None = None) -> int:
    args_given = sys.argv[1:] if argv is None else argv
    # Each command imports only its own module: distribute, roles and ops bring Alembic, SQLAlchemy
    # and the ops queries, which serve's start has no use for. A command's subparser gets its
    # description and arguments only when it is the one named (the others show only in the list).
    named = _command_named(args_given)
    parser = argparse.ArgumentParser(prog="python -m service", description=__doc__)
    parser.add_argument("--version", action="version", version=f"lineup-runtime {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("migrate", help="alembic upgrade head against DATABASE_URL")
    _command(
        commands,
        named,
        "distribute",
        "spread the migrated schema over a Citus cluster (on its coordinator, after migrate)",
    )
    _command(
        commands, named, "roles", "create or update the database roles and their grants (run as an admin)"
    )
    serve = commands.add_parser("serve", help="the HTTP service and the deadline sweeper")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--no-sweeper", action="store_true", help="leave deadlines to other replicas")
    dev = commands.add_parser("dev", help="everything on one machine, embedded Postgres if needed")
    dev.add_argument("--host", default="127.0.0.1")
    dev.add_argument("--port", type=int, default=8000)
    dev.add_argument("--data-dir", default=".dev", help="where dev keeps its Postgres and tokens")
    _command(commands, named, "ops", "operator CLI: outbox, operations, stats, trace")
    _command(
        commands,
        named,
        "settings",
        "every environment variable, grouped, with its value here (secrets masked)",
    )
    args = parser.parse_args(args_given)
    if args.command != "dev" and (found := dev_env.adopt(os.environ)) is not None:
        print(dev_env.note(found), file=sys.stderr)
    try:
        if args.command == "migrate":
            from service.cli.migrate import run as run_migrate

            return run_migrate()
        if args.command == "distribute":
            from service.cli.distribute import run as run_distribute

            return run_distribute(args)
        if args.command == "roles":
            from service.cli.roles import run as run_roles

            return run_roles(args)
        if args.command == "serve":
            from service.cli.serve import run as run_serve

            return run_serve(args.host, args.port, sweeper=not args.no_sweeper)
        if args.command == "dev":
            from service.cli.dev import run as run_dev

            return run_dev(args.host, args.port, args.data_dir)
        if args.command == "settings":
            from service.cli.settings import run as run_settings

            return run_settings(args)
        if args.command == "ops":
            # A write's log line goes, as the ops API's does, to stderr as JSON: stdout is the answer.
            from service.cli.ops import run as run_ops
            from service.logging import configure_logging

            configure_logging()
            return run_ops(args)
    except SettingsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    parser.error(f"unknown command {args.command}")
    return 2


if __name__ == "__main__":
    sys.exit(main())

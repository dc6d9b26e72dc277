"""``python -m service roles``: create or update the database roles and their grants.

Run as an administrator (the Postgres image's superuser, or a role that may create roles and owns
the database) against the service's database. Idempotent: a second run changes nothing. With
``--existing`` the roles must already exist (managed Postgres: the platform's admin made them) and
only the grants are made. Names come from DB_OWNER_ROLE, DB_RUNTIME_ROLE, DB_RELAY_ROLE,
DB_READER_ROLE; passwords (optional) from DB_OWNER_PASSWORD, DB_RUNTIME_PASSWORD,
DB_RELAY_PASSWORD, DB_READER_PASSWORD. See docs/operations.md, "Database roles".
"""

from __future__ import annotations

import argparse
import sys

import psycopg

from service.cli.connect import connect_when_ready
from service.db import roles
from service.manifests import registry_of
from service.settings import load_settings

DESCRIPTION = __doc__


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--existing",
        action="store_true",
        help="only grant: the roles exist already (managed Postgres); never create or alter them",
    )


def run(args: argparse.Namespace) -> int:
    settings = load_settings("roles")
    names = roles.Names(**settings.role_names)
    # Postgres may still be starting (a compose stack without health gating, a Job beside it): the
    # first connection is tried again for ROLES_CONNECT_SECONDS. UTF8 whatever the server's
    # encoding: on a SQL_ASCII database psycopg would otherwise hand back bytes for every name.
    registry = registry_of(settings)
    conn = connect_when_ready(
        settings.psycopg_url,
        settings.roles_connect_seconds,
        command="roles",
        setting="ROLES_CONNECT_SECONDS",
        client_encoding="UTF8",
    )
    try:
        with conn:
            outcome = roles.ensure(
                conn,
                names,
                registry,
                settings.role_passwords,
                create=not args.existing,
                limits=roles.parse_limits(settings.db_role_limits),
            )
    except (LookupError, ValueError) as exc:
        print(f"roles: {exc}", file=sys.stderr)
        return 1
    except psycopg.errors.InsufficientPrivilege as exc:
        print(
            f"roles: {exc.diag.message_primary}: run this as an administrator (a superuser, or the"
            " owner of the database with CREATEROLE); with --existing, as the owner",
            file=sys.stderr,
        )
        return 1
    except psycopg.errors.LockNotAvailable as exc:
        print(
            f"roles: {exc.diag.message_primary} within {roles.LOCK_TIMEOUT} (a long transaction holds it);"
            " what was done stays done: run roles again to finish",
            file=sys.stderr,
        )
        return 1
    except psycopg.OperationalError as exc:
        print(f"roles: the connection to the database failed: {exc}", file=sys.stderr)
        return 1
    for change in outcome.changes:
        print(f"roles: {change}")
    for warning in outcome.warnings:
        print(f"roles: warning: {warning}", file=sys.stderr)
    for name in outcome.unclassified:
        print(f"roles: warning: {name} is not in the grants map (service/db/roles.py)", file=sys.stderr)
    kinds = ", ".join(f"{kind} {names.of(kind)}" for kind in roles.KINDS)
    print(f"roles: {len(outcome.changes)} change(s); roles {kinds}")
    return 0

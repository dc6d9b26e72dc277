"""``python -m service migrate``."""

from __future__ import annotations

import sys

from service.cli.connect import RETRY_SECONDS, connect_when_ready
from service.db import roles
from service.db.migrate import upgrade
from service.db.schema_revision import head_revision
from service.manifests import ManifestError, registry_of
from service.settings import Settings, load_settings


def wait_for_database(settings: Settings, *, sleep: float = RETRY_SECONDS) -> None:
    """Until the database takes a connection, for at most MIGRATE_CONNECT_SECONDS: a database that
    is still starting (a compose stack without health gating) is waited for, one line per try;
    SystemExit with the last error once the time is up."""
    connect_when_ready(
        settings.psycopg_url,
        settings.migrate_connect_seconds,
        command="migrate",
        setting="MIGRATE_CONNECT_SECONDS",
        sleep=sleep,
        autocommit=True,
    ).close()


def run() -> int:
    settings = load_settings("migrate")
    try:
        registry = registry_of(settings)  # the apps whose database code it applies and grants
    except ManifestError as exc:
        print(f"migrate: bad manifest: {exc}", file=sys.stderr)
        return 2
    wait_for_database(settings)
    outcome = upgrade(settings.psycopg_url, registry, roles.Names(**settings.role_names))
    for change in outcome.changes:
        print(f"migrate: {change}", file=sys.stderr)
    for warning in outcome.warnings:
        print(f"migrate: warning: {warning}", file=sys.stderr)
    for name in outcome.unclassified:
        print(
            f"migrate: warning: {name} is not in the grants map (service/db/roles.py):"
            " no role but the owner may use it",
            file=sys.stderr,
        )
    print(f"migrated to {head_revision()}")
    return 0

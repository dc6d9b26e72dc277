"""``python -m service migrate``."""

from __future__ import annotations

import sys
import time

import psycopg

from service.db import roles, urls
from service.db.migrate import upgrade
from service.db.schema_revision import head_revision
from service.manifests import ManifestError, registry_of
from service.settings import Settings, load_settings

#: Seconds between two tries of the first connection.
RETRY_SECONDS = 2.0


def _shown(url: str) -> str:
    """The URL without its password, for a log line."""
    secret = urls.password(url)
    return url.replace(f":{secret}@", ":***@") if secret else url


def wait_for_database(settings: Settings, *, sleep: float = RETRY_SECONDS) -> None:
    """Until the database takes a connection, for at most MIGRATE_CONNECT_SECONDS: a database that
    is still starting (a compose stack without health gating) is waited for, one line per try;
    SystemExit with the last error once the time is up."""
    url = settings.psycopg_url
    deadline = time.monotonic() + settings.migrate_connect_seconds
    tries = 0
    while True:
        tries += 1
        try:
            psycopg.connect(url, connect_timeout=5, autocommit=True).close()
            return
        except psycopg.OperationalError as exc:
            reason = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
            left = deadline - time.monotonic()
            if left <= 0:
                raise SystemExit(
                    f"migrate: cannot connect to {_shown(url)} after {tries} tries in"
                    f" {settings.migrate_connect_seconds:g} s (MIGRATE_CONNECT_SECONDS): {reason}"
                ) from None
            wait = min(sleep, left)
            print(
                f"migrate: cannot connect to the database yet (try {tries}: {reason}); trying again in"
                f" {wait:.0f} s, {left:.0f} s left",
                file=sys.stderr,
                flush=True,
            )
            time.sleep(wait)


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
    for name in outcome.unclassified:
        print(
            f"migrate: warning: {name} is not in the grants map (service/db/roles.py):"
            " no role but the owner may use it",
            file=sys.stderr,
        )
    print(f"migrated to {head_revision()}")
    return 0

"""Alembic environment: the URL comes from the caller (``service.db.migrate``) or DATABASE_URL.

After the table migrations, an upgrade to head applies the database code (``service.db.code``:
functions, triggers, types and views from ``service/db/sql/`` and the registry's app folders) and
then the grants of the database roles that exist (``service.db.roles.grant``), in the same
transaction. The registry is the caller's (``migrate`` builds it from the settings); run by
``alembic`` itself, it is the one the settings in the environment name. A lock keeps two ``migrate``
runs from interleaving.
"""

from __future__ import annotations

import os

from alembic import context
from sqlalchemy import Connection, create_engine, pool

from service.db import code, roles
from service.db.tables import metadata
from service.manifests import Registry, registry_of
from service.settings import Settings

config = context.config
target_metadata = metadata


def _url() -> str:
    url = config.get_main_option("sqlalchemy.url") or os.environ.get("DATABASE_URL", "")
    if not url:
        raise SystemExit("DATABASE_URL is not set")
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


# Any constant of our own: the key of the advisory lock `migrate` holds while it runs.
MIGRATE_LOCK = 7_410_001


def _registry() -> Registry:
    registry = config.attributes.get("registry")
    return registry if isinstance(registry, Registry) else registry_of(Settings())


def _to_head() -> bool:
    target = context.get_revision_argument()
    return target in ("head", "heads") or target == context.script.get_current_head()


def run_migrations_offline() -> None:
    context.configure(url=_url(), target_metadata=target_metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()
        if _to_head():
            context.execute("SET LOCAL check_function_bodies = off")
            for definition in code.definitions(code.SOURCE, _registry().folders):
                context.execute(definition.sql)


def run_migrations_online() -> None:
    # UTF8 whatever the server's encoding: on a SQL_ASCII database psycopg hands back text as bytes,
    # which the dialect's version parsing and the database code's loader cannot read.
    engine = create_engine(_url(), poolclass=pool.NullPool, connect_args={"client_encoding": "utf8"})
    with engine.connect() as connection:
        context.configure(connection=connection, target_metadata=target_metadata)
        with context.begin_transaction():
            connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({MIGRATE_LOCK})")
            context.run_migrations()
            if _to_head():
                driver = connection.connection.driver_connection
                registry = _registry()
                code.apply(driver, registry.folders, drop=False)
                names = config.attributes.get("role_names") or roles.Names()
                config.attributes["roles_outcome"] = roles.grant(driver, names, registry)
        if _to_head():
            _drop_unwanted(connection, _registry())
    engine.dispose()


def _drop_unwanted(connection: Connection, registry: Registry) -> None:
    """What the files no longer hold, once no call can still be running the bodies that named it
    (``service.db.code.apply``): after the commit above, the transactions open then are waited for
    (at most ``code.DROP_WAIT_SECONDS``), then it goes in a transaction of its own. One still open
    by then leaves it all for the next ``migrate``, and says so."""
    driver = connection.connection.driver_connection
    driver.autocommit = True
    try:
        still_open = code.wait_for_older_transactions(driver, code.DROP_WAIT_SECONDS)
        if still_open:
            config.attributes["drop_warnings"] = [
                f"transactions begun before the new database code still run after"
                f" {code.DROP_WAIT_SECONDS:.0f} s (processes {', '.join(map(str, still_open))}): what the"
                " files no longer hold stays until the next migrate"
            ]
            return
        with driver.transaction():
            driver.execute(f"SELECT pg_advisory_xact_lock({MIGRATE_LOCK})")
            config.attributes["dropped"] = code.drop_unwanted(driver, registry.folders)
    finally:
        driver.autocommit = False


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()

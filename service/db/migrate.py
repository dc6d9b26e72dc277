"""Run the Alembic migrations (whether a database serves this release: ``service.db.schema_revision``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from alembic import command
from alembic.config import Config

from service.db import roles
from service.db.urls import sqlalchemy_url

if TYPE_CHECKING:
    from service.manifests import Registry

_ROOT = Path(__file__).resolve().parents[2]


def alembic_config(url: str) -> Config:
    config = Config(str(_ROOT / "alembic.ini"))
    config.set_main_option("script_location", str(_ROOT / "migrations"))
    # SQLAlchemy cannot parse libpq's host list (h1:5432,h2:5432): several hosts go as host=
    # parameters. ConfigParser interpolation: a literal % must be doubled.
    config.set_main_option("sqlalchemy.url", sqlalchemy_url(url).replace("%", "%%"))
    return config


def upgrade(url: str, registry: Registry, names: roles.Names | None = None) -> roles.Outcome:
    """``alembic upgrade head`` against ``url``, with the database code of the engine and of
        ``registry``'s apps; in the same transaction, the privileges of the database roles (``names``,
        the defaults unless given) that exist are brought in line with the grants map
        (``service.db.roles.grant``). Once every transaction begun before that commit has ended, what
    the database code no longer holds is dropped (``migrations/env.py``). Answers what the grants and
    the drops changed."""
    config = alembic_config(url)
    config.attributes["registry"] = registry
    config.attributes["role_names"] = names or roles.Names()
    command.upgrade(config, "head")
    outcome = config.attributes.get("roles_outcome")
    outcome = outcome if isinstance(outcome, roles.Outcome) else roles.Outcome()
    outcome.changes += config.attributes.get("dropped", [])
    outcome.warnings += config.attributes.get("drop_warnings", [])
    return outcome

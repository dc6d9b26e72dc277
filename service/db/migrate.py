"""Run the Alembic migrations and report whether a database is at head."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory

from service.db.urls import sqlalchemy_url

_ROOT = Path(__file__).resolve().parents[2]


def alembic_config(url: str) -> Config:
    config = Config(str(_ROOT / "alembic.ini"))
    config.set_main_option("script_location", str(_ROOT / "migrations"))
    # SQLAlchemy cannot parse libpq's host list (h1:5432,h2:5432): several hosts go as host=
    # parameters. ConfigParser interpolation: a literal % must be doubled.
    config.set_main_option("sqlalchemy.url", sqlalchemy_url(url).replace("%", "%%"))
    return config


def upgrade(url: str) -> None:
    """``alembic upgrade head`` against ``url``."""
    command.upgrade(alembic_config(url), "head")


def head_revision() -> str:
    script = ScriptDirectory.from_config(alembic_config("postgresql://unused"))
    head = script.get_current_head()
    assert head is not None
    return head

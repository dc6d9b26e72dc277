"""``python -m service migrate``."""

from __future__ import annotations

from service.db.migrate import head_revision, upgrade
from service.settings import load_settings


def run() -> int:
    settings = load_settings("migrate")
    upgrade(settings.psycopg_url)
    print(f"migrated to {head_revision()}")
    return 0

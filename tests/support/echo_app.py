"""A test-only app, added the way any MiniApp is: one folder (tests/fixtures/echo_app/) holding its
manifest, its decision function in SQL and its registration — nothing under service/."""

from __future__ import annotations

from pathlib import Path

FOLDER = Path(__file__).resolve().parents[1] / "fixtures" / "echo_app"


def decision_sql() -> str:
    return "\n".join(path.read_text() for path in sorted(FOLDER.glob("*.sql")))

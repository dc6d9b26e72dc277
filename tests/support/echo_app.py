"""A test-only app, added the way any Tool is: a manifest entry (tests/fixtures/echo_app/echo.json),
a decision function in SQL (echo.sql) and a registration — nothing under service/api or service/mcp."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from service.domain.errors import Conflict
from service.domain.outcomes import Answered
from service.tools import Hints, Registration

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "echo_app"


def _said(body: Mapping[str, Any]) -> str:
    return f"Echo said {body['word']}."


ECHO = Registration(
    name="echo.say",
    decide="echo_say",
    outcomes={"said": Answered, "word_forbidden": Conflict},
    hints=Hints(title="Say it back", read_only=True),
    sentence=_said,
)


def manifests_with_echo(shipped: Path, into: Path) -> Path:
    """The shipped manifests and the echo app's, in one directory."""
    into.mkdir(parents=True, exist_ok=True)
    for manifest in shipped.glob("*.json"):
        shutil.copy(manifest, into / manifest.name)
    shutil.copy(FIXTURE / "echo.json", into / "echo.json")
    return into


def decision_sql() -> str:
    return (FIXTURE / "echo.sql").read_text()

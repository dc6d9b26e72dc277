"""The operator CLI in-process against a test database, for the tests of ``python -m service ops``."""

from __future__ import annotations

from typing import Any

import pytest

from service.cli.ops import main


def ops(database_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Any:
    """Run ``ops ARGS…`` in-process against the test database; returns (exit code, stdout, stderr)."""
    monkeypatch.setenv("DATABASE_URL", database_url)

    def run(*args: str) -> tuple[int, str, str]:
        code = main(list(args))
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return run


def outbox_row(db: Any, event_id: str) -> Any:
    return db.execute("SELECT * FROM outbox WHERE event_id = %s", [event_id]).fetchone()

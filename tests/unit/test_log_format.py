"""What the processes log as: JSON lines by default (a collector, a file, a container), lines for a
person with ``LOG_FORMAT=console`` — which ``make dev`` sets when its output is a terminal."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from harness.processes import ROOT
from service.cli.dev import log_format
from service.logging import console_format

LOG_SOME = """
import logging, structlog
from service.logging import Lines, configure_logging
configure_logging()
structlog.get_logger("lineup.test").info("tool_call", tool="pomodoro.start", status=202)
Lines("lineup.fast").info("settled", operation_id="op-1")
logging.getLogger("uvicorn.error").warning("hello %s", "there")
"""


def logged(**env: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", LOG_SOME],
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stderr.splitlines()


def test_by_default_every_line_is_one_json_object() -> None:
    lines = logged()
    events = [json.loads(line)["event"] for line in lines]
    assert events == ["tool_call", "settled", "hello there"]


def test_log_format_console_writes_lines_a_person_reads() -> None:
    lines = logged(LOG_FORMAT="console")
    assert len(lines) == 3, lines
    assert not any(line.startswith("{") for line in lines)
    assert "tool_call" in lines[0] and "tool=pomodoro.start" in lines[0] and "[info" in lines[0]
    assert "settled" in lines[1] and "operation_id=op-1" in lines[1]
    assert "hello there" in lines[2] and "[warning" in lines[2]


def test_dev_picks_console_lines_at_a_terminal_and_json_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert log_format({}, terminal=False) == "json"
    assert log_format({"LOG_FORMAT": "json"}, terminal=True) == "json"
    assert log_format({"LOG_FORMAT": "console"}, terminal=False) == "console"
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    assert log_format({}, terminal=True) == "json"


def test_an_unknown_log_format_is_refused() -> None:
    assert console_format({"LOG_FORMAT": " Console "})
    with pytest.raises(ValueError, match="LOG_FORMAT must be json or console"):
        console_format({"LOG_FORMAT": "pretty"})

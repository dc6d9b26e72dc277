"""The Makefile's commands for a person at a terminal: `make help` aligns every target's text, and
a failed `make ops` or `make links` ends with the command's own message, not make's
"*** [Makefile:…] Error 1" (which scripts, with no terminal, still get as a failure)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAKE = shutil.which("make")
SCRIPT = shutil.which("script")

pytestmark = pytest.mark.skipif(MAKE is None, reason="make is not installed")


def make(*args: str, terminal: bool = False, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_TOKEN") and k != "DATABASE_URL"}
    # -o: the venv counts as made (the test runs in it), so no target reinstalls it.
    command = [str(MAKE), "-s", "-f", str(ROOT / "Makefile"), "-o", ".venv/.installed", *args]
    if terminal:
        assert SCRIPT is not None
        command = [SCRIPT, "-qec", " ".join(f"'{part}'" for part in command), "/dev/null"]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False)


def test_help_aligns_every_target_however_long_its_name() -> None:
    done = make("help")
    assert done.returncode == 0
    starts = {line.index(text) for line in done.stdout.splitlines() for text in [line.split(None, 1)[1]]}
    assert len(starts) == 1, done.stdout
    assert "system-deps" in done.stdout and "mcp-conformance" in done.stdout


@pytest.mark.skipif(SCRIPT is None, reason="script (util-linux) is not installed")
def test_a_failed_command_at_a_terminal_ends_with_its_own_message(tmp_path: Path) -> None:
    shown = make("links", terminal=True, cwd=tmp_path)
    assert "no dev stack runs from this folder" in shown.stdout
    assert not re.search(r"\*\*\* \[.*\] Error", shown.stdout), shown.stdout
    assert shown.returncode == 0
    ops = make("ops", "ARGS=outbox show zzzz", terminal=True)
    assert "error: " in ops.stdout and not re.search(r"\*\*\* \[.*\] Error", ops.stdout), ops.stdout
    assert ops.returncode == 0


def test_a_failed_command_in_a_script_is_still_a_failure(tmp_path: Path) -> None:
    done = make("links", cwd=tmp_path)
    assert done.returncode != 0
    assert "no dev stack runs from this folder" in done.stderr

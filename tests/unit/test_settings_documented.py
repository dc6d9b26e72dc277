"""Every environment variable the settings object reads is documented in its group's table of
docs/operations.md, "Settings", and every variable documented there is read; ``python -m service
settings`` prints each in its group and never a secret."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from service.settings import GROUPS, REQUIRED_FOR, Settings, group_of, is_secret

ROOT = Path(__file__).resolve().parents[2]
HEADINGS = {"Required": "required", "Common": "common", "Tuning": "tuning", "Roles": "roles"}
HEADINGS["Development only"] = "development"


def documented() -> dict[str, set[str]]:
    """The variables of each group's table: the backticked names of each row's first cell."""
    text = (ROOT / "docs" / "operations.md").read_text()
    section = text.split("\n## Settings\n", 1)[1].split("\n## ", 1)[0]
    groups: dict[str, set[str]] = {}
    group: str | None = None
    for line in section.splitlines():
        if line.startswith("### "):
            group = HEADINGS[line[4:].strip()]
            groups[group] = set()
        elif group is not None and line.startswith("| `"):
            first = line.split("|")[1]
            groups[group] |= set(re.findall(r"`([A-Z][A-Z0-9_]*)`", first))
    return groups


def test_every_setting_has_a_group() -> None:
    assert [name for name in Settings.model_fields if group_of(name) is None] == []


def test_every_setting_is_documented_in_its_group_and_nothing_else_is() -> None:
    in_code = {group: set[str]() for group in GROUPS}
    for name in Settings.model_fields:
        group = group_of(name)
        assert group is not None
        in_code[group].add(name.upper())
    assert documented() == in_code


def test_the_required_group_is_what_the_commands_require() -> None:
    required = {name.upper() for name in Settings.model_fields if group_of(name) == "required"}
    assert required == {name for names in REQUIRED_FOR.values() for name in names}


def test_the_settings_command_prints_each_variable_in_its_group_and_masks_secrets() -> None:
    secret = "a-secret-of-this-test-" + "x1y2z3w4"
    env = {
        **{k: v for k, v in os.environ.items() if k not in {n.upper() for n in Settings.model_fields}},
        "DATABASE_URL": f"postgresql://someone:{secret}@db.example/lineup",
        "AGENT_TOKEN": secret,
        "WEBHOOK_SECRET": "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        "RELAY_CONCURRENCY": "32",
    }
    printed = subprocess.run(
        [sys.executable, "-m", "service", "settings"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert printed.returncode == 0, printed.stderr
    out = printed.stdout
    assert secret not in out and "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" not in out
    assert "postgresql://someone:****@db.example/lineup" in out
    assert re.search(r"^  RELAY_CONCURRENCY +32  \(default 64\)$", out, re.MULTILINE)
    blocks = out.split("\n\n")
    assert len(blocks) == len(GROUPS)
    for block, group in zip(blocks, GROUPS, strict=True):
        names = set(re.findall(r"^  ([A-Z][A-Z0-9_]*) ", block, re.MULTILINE))
        assert names == {n.upper() for n in Settings.model_fields if group_of(n) == group}
        for name in names:
            if is_secret(name.lower()) and name in env and not name.endswith("DATABASE_URL"):
                assert re.search(rf"^  {name} +set \(\*\*\*\*\)", block, re.MULTILINE)

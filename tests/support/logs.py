"""The JSON log records a process wrote, read as records rather than matched as text."""

from __future__ import annotations

import json
from typing import Any


def records(output: str) -> list[dict[str, Any]]:
    """Every JSON object line of ``output``; other lines (banners, tracebacks) are skipped."""
    found = []
    for line in output.splitlines():
        text = line.strip()
        if not text.startswith("{"):
            continue
        try:
            record = json.loads(text)
        except ValueError:
            continue
        if isinstance(record, dict):
            found.append(record)
    return found


def named(output: str, event: str) -> list[dict[str, Any]]:
    """The records of one event."""
    return [record for record in records(output) if record.get("event") == event]


def at_least(output: str, level: str) -> list[dict[str, Any]]:
    """The records at ``level`` (warning or error) or above."""
    levels = {"warning": ("warning", "error", "critical"), "error": ("error", "critical")}[level]
    return [record for record in records(output) if record.get("level") in levels]

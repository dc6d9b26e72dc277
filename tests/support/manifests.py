"""Manifests for the manifest tests: the shipped ones, a minimal app, and a manifest written into a
directory of app folders (``timer.json`` is written as ``timer/manifest.json``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from service.json_errors import ErrorDetail

SHIPPED = Path(__file__).resolve().parents[2] / "service" / "apps"
SCHEMA = "manifest.schema.json"


def paths(details: list[ErrorDetail]) -> list[str]:
    return [d.path for d in details]


def shipped(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(_path(SHIPPED, name).read_text())
    return data


def _path(directory: Path, name: str) -> Path:
    return directory / name if name == SCHEMA else directory / name.removesuffix(".json") / "manifest.json"


def write(directory: Path, name: str, doc: object) -> Path:
    path = _path(directory, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


def minimal(scope: str = "timer", **tool: Any) -> dict[str, Any]:
    spec = {
        "name": f"{scope}.go",
        "kind": "direct",
        "description": "Go.",
        "input_schema": {"type": "object"},
    } | tool
    return {
        "manifest_version": 1,
        "app_scope": scope,
        "name": scope.title(),
        "description": "An app.",
        "surface": {"kind": "builtin"},
        "tools": [spec],
    }

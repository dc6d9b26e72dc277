"""The version of Lineup Runtime: one source, ``version`` in ``pyproject.toml`` (semantic versioning;
``CHANGELOG.md`` says what each release changed, ``releases.toml`` records each one).

Read from the ``pyproject.toml`` beside the code when there is one (a checkout, a git worktree of an
older release run on this checkout's environment, the image, which copies it to ``/app``), else from
the installed distribution's metadata (``pip install`` of a wheel): either way the version of the
code that runs, never that of another checkout's installation."""

from __future__ import annotations

import tomllib
from importlib import metadata
from pathlib import Path

DISTRIBUTION = "lineup-runtime"
_PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def _version() -> str:
    try:
        with _PYPROJECT.open("rb") as file:
            project = tomllib.load(file).get("project", {})
    except FileNotFoundError:
        project = {}
    if project.get("name") == DISTRIBUTION and isinstance(project.get("version"), str):
        return str(project["version"])
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "0+unknown"


__version__ = _version()

"""The previous release beside this checkout: ``make upgrade`` serves it side by side with this one,
and the instruction benches count the same work in both. It is the newest release of the record,
``releases.toml``, and runs from a git worktree of this repository on this checkout's Python
environment, its tree first on ``PYTHONPATH``."""

from __future__ import annotations

import contextlib
import datetime
import os
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from harness.processes import ROOT

#: The record of every release, oldest first (docs/operations.md, "Upgrading").
RECORD = ROOT / "releases.toml"


@dataclass(frozen=True, slots=True)
class Release:
    """One release as ``releases.toml`` records it."""

    version: str
    commit: str
    date: datetime.date
    schema_head: str
    interface: int
    database_interfaces: tuple[int, ...]


def recorded_releases(record: Path = RECORD) -> list[Release]:
    """Every release of ``record``, oldest first."""
    with record.open("rb") as file:
        entries = tomllib.load(file)["release"]
    return [
        Release(
            version=str(e["version"]),
            commit=str(e["commit"]),
            date=e["date"],
            schema_head=str(e["schema_head"]),
            interface=int(e["interface"]),
            database_interfaces=tuple(int(i) for i in e["database_interfaces"]),
        )
        for e in entries
    ]


def newest_release(record: Path = RECORD) -> Release:
    """The release this checkout upgrades from: the last one recorded."""
    return recorded_releases(record)[-1]


#: The commit of the release this one upgrades from (the newest recorded); it moves forward when a
#: release is cut and recorded.
PREVIOUS_RELEASE = newest_release().commit


@contextlib.contextmanager
def previous_release(commit: str) -> Iterator[Path]:
    """``commit`` checked out into a git worktree (its tree), removed afterwards."""
    tree = Path(tempfile.mkdtemp(prefix="lineup-previous-"))
    added = subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), commit],
        capture_output=True,
        text=True,
        check=False,
    )
    if added.returncode != 0:
        raise SystemExit(
            f"cannot check out the previous release {commit[:12]} ({added.stderr.strip()}); "
            "a shallow clone lacks it: git fetch --unshallow"
        )
    try:
        yield tree
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False)


def release_env(tree: Path) -> dict[str, str]:
    """What runs a release's code from ``tree``: the tree first on ``PYTHONPATH``."""
    path = [str(tree), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {"PYTHONPATH": os.pathsep.join(path)}


def migrate_release(tree: Path, url: str) -> None:
    """``python -m service migrate`` of the release in ``tree`` against ``url``."""
    env = {**os.environ, **release_env(tree), "DATABASE_URL": url}
    done = subprocess.run(
        [sys.executable, "-m", "service", "migrate"], cwd=tree, env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise RuntimeError(f"migrate in {tree} failed:\n{done.stderr[-2000:]}")

"""The previous release beside this checkout: ``make upgrade`` serves it side by side with this one,
and the instruction benches count the same work in both. It runs from a git worktree of this
repository on this checkout's Python environment, its tree first on ``PYTHONPATH``."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from harness.processes import ROOT

#: The release this one upgrades from; it moves forward when a release is cut (docs/operations.md,
#: "Upgrading").
PREVIOUS_RELEASE = "747472aefc1f1acb27e84a2033d3034bc9c60819"


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

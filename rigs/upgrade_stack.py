"""The two releases ``rigs.upgrade`` runs side by side: a release (its tree, run with this checkout's
Python environment), the processes of either on one database (``migrate``, ``serve``, relays), and
the previous release checked out into a ``git worktree``."""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.processes import ROOT, Child, ServiceProcess, log_tail


@dataclass
class Release:
    name: str
    tree: Path  # the source tree its processes run from

    def env(self) -> dict[str, str]:
        path = [str(self.tree), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
        return {"PYTHONPATH": os.pathsep.join(path)}


@dataclass
class Stack:
    """What both releases share: the database, the tokens, the Agent's endpoint."""

    database_url: str
    logs: Path
    webhook_url: str
    webhook_secret: str
    agent_token: str = field(default_factory=lambda: "rig-agent-" + secrets.token_hex(16))
    host_token: str = field(default_factory=lambda: "rig-host-" + secrets.token_hex(16))
    operator_token: str = field(default_factory=lambda: "rig-operator-" + secrets.token_hex(16))
    session_secret: str = field(default_factory=lambda: secrets.token_hex(32))

    def env(self, release: Release) -> dict[str, str]:
        return {
            **release.env(),
            "DATABASE_URL": self.database_url,
            "AGENT_TOKEN": self.agent_token,
            "HOST_TOKEN": self.host_token,
            "OPERATOR_TOKEN": self.operator_token,
            "HOST_SESSION_SECRET": self.session_secret,
            "AGENT_WEBHOOK_URL": self.webhook_url,
            "WEBHOOK_SECRET": self.webhook_secret,
            "RELAY_BACKOFF_MAX_SECONDS": "2",
        }

    def migrate(self, release: Release) -> float:
        began = time.monotonic()
        log = self.logs / f"migrate-{release.name}.log"
        done = Child(["-m", "service", "migrate"], log, self.env(release), cwd=release.tree).start()
        assert done.process is not None
        if done.process.wait(timeout=300) != 0:
            raise RuntimeError(f"{release.name}'s migrate failed:\n{log_tail(log)}")
        return time.monotonic() - began

    def serve(self, release: Release) -> ServiceProcess:
        """``serve`` of ``release``, ready (``/readyz`` 200)."""
        served = ServiceProcess(self.database_url, self.logs, env=self.env(release), cwd=release.tree)
        served.start_ready()
        return served

    def relay(self, release: Release, n: int) -> Child:
        log = self.logs / f"relay-{release.name}-{n}.log"
        return Child(["-m", "relay"], log, self.env(release), cwd=release.tree).start()


@contextlib.contextmanager
def previous_release(commit: str) -> Iterator[Path]:
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

"""The two releases ``rigs.upgrade`` runs side by side: a release (its tree, run with this checkout's
Python environment, ``tests.support.releases``) and the processes of either on one database
(``migrate``, ``serve``, relays)."""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.processes import Child, ServiceProcess, log_tail
from tests.support.releases import release_env


@dataclass
class Release:
    name: str
    tree: Path  # the source tree its processes run from

    def env(self) -> dict[str, str]:
        return release_env(self.tree)


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

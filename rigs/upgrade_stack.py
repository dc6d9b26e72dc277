"""The two releases ``rigs.upgrade`` runs side by side: a release (its tree, run with this checkout's
Python environment, ``harness.releases``) and the processes of either on one database
(``migrate``, ``serve``, relays). A release may run on the least-privilege roles: ``migrate`` as the
owner, ``serve`` as the runtime role, the relays as the relay role (``python -m service roles``)."""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
from psycopg import sql

from harness.database import with_user
from harness.processes import Child, ServiceProcess, log_tail
from harness.releases import release_env
from service.db import roles


@dataclass
class Release:
    name: str
    tree: Path  # the source tree its processes run from
    roles: roles.Names | None = None  # its processes' roles; None: every one as the admin

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

    def url(self, release: Release, kind: str) -> str:
        """Where a process of ``release`` connects: as the ``kind`` role when the release runs on
        roles, else as the admin."""
        if release.roles is None:
            return self.database_url
        return with_user(self.database_url, release.roles.of(kind))

    def env(self, release: Release, kind: str = roles.OWNER) -> dict[str, str]:
        named = (
            {}
            if release.roles is None
            else {f"DB_{k.upper()}_ROLE": release.roles.of(k) for k in roles.KINDS}
        )
        return {
            **release.env(),
            **named,
            "DATABASE_URL": self.url(release, kind),
            "AGENT_TOKEN": self.agent_token,
            "HOST_TOKEN": self.host_token,
            "OPERATOR_TOKEN": self.operator_token,
            "HOST_SESSION_SECRET": self.session_secret,
            "AGENT_WEBHOOK_URL": self.webhook_url,
            "WEBHOOK_SECRET": self.webhook_secret,
            "RELAY_BACKOFF_MAX_SECONDS": "2",
        }

    def make_roles(self, release: Release) -> None:
        """``release``'s ``python -m service roles``, as the admin, as an operator runs it before
        the release's ``migrate``: the roles made and every object of the schema handed to the owner
        while the previous release serves."""
        assert release.roles is not None
        log = self.logs / f"roles-{release.name}.log"
        env = {**self.env(release), "DATABASE_URL": self.database_url}
        done = Child(["-m", "service", "roles"], log, env, cwd=release.tree).start()
        assert done.process is not None
        if done.process.wait(timeout=120) != 0:
            raise RuntimeError(f"{release.name}'s roles failed:\n{log_tail(log)}")

    @staticmethod
    def drop_roles(release: Release, server_url: str) -> None:
        """The release's roles gone from the server of ``server_url`` (after its database was dropped)."""
        assert release.roles is not None
        with psycopg.connect(server_url, autocommit=True) as conn:
            for kind in roles.KINDS:
                conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(release.roles.of(kind))))

    def migrate(self, release: Release) -> float:
        began = time.monotonic()
        log = self.logs / f"migrate-{release.name}.log"
        done = Child(
            ["-m", "service", "migrate"], log, self.env(release, roles.OWNER), cwd=release.tree
        ).start()
        assert done.process is not None
        if done.process.wait(timeout=300) != 0:
            raise RuntimeError(f"{release.name}'s migrate failed:\n{log_tail(log)}")
        return time.monotonic() - began

    def serve(self, release: Release) -> ServiceProcess:
        """``serve`` of ``release``, ready (``/readyz`` 200)."""
        served = ServiceProcess(
            self.database_url, self.logs, env=self.env(release, roles.RUNTIME), cwd=release.tree
        )
        try:
            served.start_ready()
        except BaseException:
            served.stop()  # never left running behind a failed start
            raise
        return served

    def relay(self, release: Release, n: int) -> Child:
        log = self.logs / f"relay-{release.name}-{n}.log"
        return Child(["-m", "relay"], log, self.env(release, roles.RELAY), cwd=release.tree).start()

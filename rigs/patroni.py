"""A Patroni cluster of the failover rig, under a temp dir on free ports of 127.0.0.1: etcd and two
Patroni-managed Postgres 15 (Debian's ``patroni``, ``etcd-server``, ``postgresql-15``), a primary and
a synchronous standby (``synchronous=False``: an asynchronous one), to switch over and to crash.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from harness.postgres import PG_BIN, launch_server, wait_for, workdir
from harness.processes import free_port, log_tail, stop


@dataclass
class Node:
    name: str
    port: int
    api_port: int
    data: Path
    config: Path
    log: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def api(self, path: str, body: dict[str, Any] | None = None, timeout: float = 30.0) -> tuple[int, str]:
        """Patroni's REST API: GET ``path``, or POST ``body`` to it."""
        url = f"http://127.0.0.1:{self.api_port}{path}"
        answer = (
            httpx.get(url, timeout=timeout) if body is None else httpx.post(url, json=body, timeout=timeout)
        )
        return answer.status_code, answer.text

    def postmaster_pid(self) -> int:
        return int((self.data / "postmaster.pid").read_text().split()[0])


@dataclass
class PatroniCluster:
    """etcd and two Patroni nodes; ``synchronous`` makes the standby synchronous (the default)."""

    root: Path
    synchronous: bool = True
    scope: str = field(default_factory=lambda: f"lineup-rig-{secrets.token_hex(3)}")
    nodes: list[Node] = field(default_factory=list)
    etcd: subprocess.Popen[bytes] | None = None
    etcd_port: int = 0
    last_seen: list[dict[str, Any]] = field(default_factory=list)  # the members at the last look

    @property
    def hosts(self) -> str:
        return ",".join(node.address for node in self.nodes)

    def url(self, database: str = "postgres") -> str:
        """The multi-host URL every process gets; ``target_session_attrs=read-write`` finds the primary."""
        return (
            f"postgresql://postgres@{self.hosts}/{database}?target_session_attrs=read-write&connect_timeout=3"
        )

    def start(self) -> None:
        self.etcd_port, peer_port = free_port(), free_port()
        self.etcd = launch_server(
            [
                "etcd",
                "--name", "rig",
                "--data-dir", str(self.root / "etcd"),
                "--listen-client-urls", f"http://127.0.0.1:{self.etcd_port}",
                "--advertise-client-urls", f"http://127.0.0.1:{self.etcd_port}",
                "--listen-peer-urls", f"http://127.0.0.1:{peer_port}",
                "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer_port}",
                "--initial-cluster", f"rig=http://127.0.0.1:{peer_port}",
                "--initial-cluster-token", self.scope,
                "--initial-cluster-state", "new",
            ],
            self.root / "etcd.log",
        )  # fmt: skip
        wait_for(
            "etcd", lambda: httpx.get(f"http://127.0.0.1:{self.etcd_port}/health").status_code == 200, 30
        )
        # The first node bootstraps the cluster and is its primary; the second clones it.
        self._start_node("pg1")
        wait_for("the first primary", lambda: self.leader() == "pg1", 90)
        self._start_node("pg2")
        self.wait_healthy(120)

    def _start_node(self, name: str) -> None:
        # A node's ports are picked just before it starts: a port picked earlier can meanwhile be
        # the local port of one of the many short connections to etcd and to the first node's API,
        # and the node then fails to listen.
        node = Node(
            name,
            free_port(),
            free_port(),
            self.root / name,
            self.root / f"{name}.yml",
            self.root / f"{name}.log",
        )
        node.config.write_text(self._config(node))
        self.nodes.append(node)
        node.process = launch_server(["patroni", str(node.config)], node.log)

    def _config(self, node: Node) -> str:
        # JSON is YAML: no YAML library needed to write it.
        config = {
            "scope": self.scope,
            "name": node.name,
            "log": {"level": "INFO"},
            "restapi": {
                "listen": f"127.0.0.1:{node.api_port}",
                "connect_address": f"127.0.0.1:{node.api_port}",
            },
            "etcd3": {"hosts": [f"127.0.0.1:{self.etcd_port}"]},
            "bootstrap": {
                "dcs": {
                    # Patroni's shortest leader lease (20 s) and a 1 s loop; a crashed primary is
                    # failed over at once rather than restarted in place (primary_start_timeout 0).
                    "ttl": 20,
                    "loop_wait": 1,
                    "retry_timeout": 5,
                    "primary_start_timeout": 0,
                    "synchronous_mode": self.synchronous,
                    "maximum_lag_on_failover": 1048576,
                    "postgresql": {
                        "use_pg_rewind": True,
                        "parameters": {
                            "wal_level": "replica",
                            "hot_standby": "on",
                            "wal_log_hints": "on",
                            "max_wal_senders": 5,
                            "max_replication_slots": 5,
                            "max_connections": 200,
                            "synchronous_commit": "on",
                        },
                    },
                },
                "initdb": [{"encoding": "UTF8"}, {"username": "postgres"}],
            },
            "postgresql": {
                "listen": node.address,
                "connect_address": node.address,
                "data_dir": str(node.data),
                "bin_dir": str(PG_BIN),
                "pgpass": str(self.root / f"{node.name}.pgpass"),
                "authentication": {
                    "superuser": {"username": "postgres", "password": "rig"},
                    "replication": {"username": "postgres", "password": "rig"},
                    "rewind": {"username": "postgres", "password": "rig"},
                },
                "parameters": {"unix_socket_directories": str(self.root)},
                "pg_hba": [
                    "local all all trust",
                    "host all all 127.0.0.1/32 trust",
                    "host replication all 127.0.0.1/32 trust",
                ],
            },
            "tags": {"nofailover": False, "noloadbalance": False, "clonefrom": False},
        }
        return json.dumps(config, indent=2)

    # -- state ---------------------------------------------------------------------------------

    def members(self) -> list[dict[str, Any]]:
        for node in self.nodes:
            with contextlib.suppress(httpx.HTTPError):
                status, text = node.api("/cluster", timeout=2)
                if status == 200:
                    members: list[dict[str, Any]] = json.loads(text).get("members", [])
                    return members
        return []

    def leader(self) -> str | None:
        for member in self.members():
            if member.get("role") == "leader" and member.get("state") == "running":
                return str(member["name"])
        return None

    def healthy(self) -> bool:
        """A running leader and the other node streaming from it (as its sync standby when synchronous)."""
        members = self.members()
        self.last_seen = members
        roles = {m.get("name"): (m.get("role"), m.get("state")) for m in members}
        if (
            len(roles) != 2
            or sum(role == "leader" and state == "running" for role, state in roles.values()) != 1
        ):
            return False
        wanted = "sync_standby" if self.synchronous else "replica"
        return any(role == wanted and state in ("running", "streaming") for role, state in roles.values())

    def wait_healthy(self, timeout: float) -> None:
        try:
            wait_for("a leader and a streaming standby", self.healthy, timeout, interval=0.2)
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}; members at the last look: {self.last_seen}") from None

    def diagnosis(self, lines: int = 40) -> str:
        """What the cluster's processes said last: etcd's and each node's log (Patroni's lines and
        its Postgres's), and whether each process still runs."""
        parts = []
        for name, process, log in [
            ("etcd", self.etcd, self.root / "etcd.log"),
            *((node.name, node.process, node.log) for node in self.nodes),
        ]:
            state = (
                "not started"
                if process is None
                else ("running" if process.poll() is None else f"exited {process.returncode}")
            )
            parts.append(f"--- {name} ({state}), the last {lines} lines of {log}:\n{log_tail(log, lines)}")
        return "\n".join(parts)

    def node(self, name: str) -> Node:
        return next(node for node in self.nodes if node.name == name)

    # -- events --------------------------------------------------------------------------------

    def switchover(self) -> tuple[str, str]:
        """Patroni's planned switchover to the standby: (old leader, new leader)."""
        leader = self.leader()
        assert leader is not None
        candidate = next(node.name for node in self.nodes if node.name != leader)
        status, text = self.node(leader).api(
            "/switchover", {"leader": leader, "candidate": candidate}, timeout=60
        )
        if status != 200:
            raise RuntimeError(f"switchover refused: {status} {text}")
        return leader, candidate

    def crash_primary(self) -> tuple[str, int]:
        """SIGKILL the primary's postmaster (its backends die with it); Patroni fails over."""
        leader = self.leader()
        assert leader is not None
        pid = self.node(leader).postmaster_pid()
        os.kill(pid, signal.SIGKILL)
        return leader, pid

    def stop(self) -> None:
        for node in self.nodes:
            if node.process is not None:
                stop(node.process, timeout=30, group=True)
        # A postmaster Patroni could not stop (it was killed mid-way) must not outlive the rig.
        for node in self.nodes:
            with contextlib.suppress(OSError, ValueError, IndexError):
                os.kill(node.postmaster_pid(), signal.SIGKILL)
        if self.etcd is not None:
            stop(self.etcd, group=True)


def _started_cluster(*, synchronous: bool, keep: bool, attempts: int = 2) -> PatroniCluster:
    """A cluster whose leader runs and whose standby streams. A start that does not get there (the
    Patroni bootstrap is not what the rig checks) is told on stderr with every process's last log
    lines, and a fresh cluster is tried once more; the second failure ends the rig with the same."""
    for attempt in range(1, attempts + 1):
        cluster = PatroniCluster(workdir("lineup-failover-"), synchronous=synchronous)
        try:
            cluster.start()
        except Exception as exc:
            print(
                f"the Patroni cluster did not start (attempt {attempt} of {attempts}): {exc}\n"
                f"{cluster.diagnosis()}",
                file=sys.stderr,
                flush=True,
            )
            cluster.stop()
            if keep:
                print(f"kept the failed cluster's files in {cluster.root}", file=sys.stderr)
            else:
                shutil.rmtree(cluster.root, ignore_errors=True)
            if attempt == attempts:
                raise
            continue
        return cluster
    raise AssertionError("unreachable")


@contextlib.contextmanager
def patroni_cluster(*, synchronous: bool = True, keep: bool = False) -> Iterator[PatroniCluster]:
    for tool in ("patroni", "etcd"):
        if shutil.which(tool) is None:
            raise SystemExit(
                f"error: {tool} is not installed (`make failover` installs patroni and etcd-server)"
            )
    cluster = _started_cluster(synchronous=synchronous, keep=keep)
    try:
        yield cluster
    finally:
        cluster.stop()
        if keep:
            print(f"kept the rig's files in {cluster.root}")
        else:
            shutil.rmtree(cluster.root, ignore_errors=True)

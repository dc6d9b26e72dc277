"""Postgres servers of the failover rig and the chaos bench, each under a temp dir, never the machine's.

* ``Postgres``: one server from Debian's binaries (``initdb``, ``pg_ctl``) on a free port, for the
  chaos bench to restart fast and immediate.
* ``PatroniCluster``: etcd and two Patroni-managed Postgres (a primary and a synchronous standby),
  for the failover rig to switch over and to crash.

Both run their processes as the ``postgres`` user when started as root (Postgres refuses root) and
remove everything they made on exit. Nothing here touches a server it did not start.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from bench.common import free_port

PG_BIN = Path(os.environ.get("PG_BIN", "/usr/lib/postgresql/15/bin"))
RUN_AS = "postgres"


def _owner() -> tuple[str | None, int | None, int | None]:
    """Who runs the servers: ``postgres`` when we are root, else ourselves."""
    if os.geteuid() != 0:
        return None, None, None
    entry = pwd.getpwnam(RUN_AS)
    return RUN_AS, entry.pw_uid, entry.pw_gid


def _workdir(prefix: str) -> Path:
    root = Path(tempfile.mkdtemp(prefix=prefix))
    user, uid, gid = _owner()
    if user is not None:
        assert uid is not None
        assert gid is not None
        os.chown(root, uid, gid)
    root.chmod(0o700)
    return root


def _popen(args: list[str], log: Path, env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
    user, _, _ = _owner()
    with log.open("ab") as handle:
        return subprocess.Popen(
            args,
            stdout=handle,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
            user=user,
            cwd=log.parent,
            start_new_session=True,
        )


def _run(args: list[str], log: Path) -> None:
    process = _popen(args, log)
    if process.wait() != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-20:])
        raise RuntimeError(f"{' '.join(args)} exited {process.returncode}:\n{tail}")


def _terminate(process: subprocess.Popen[bytes], timeout: float = 20.0) -> None:
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def wait_for(what: str, check: Any, timeout: float, interval: float = 0.1) -> Any:
    """Call ``check`` until it returns something true; ``TimeoutError`` naming ``what``."""
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        try:
            result = check()
        except Exception as exc:  # the thing waited for is not up yet
            last = exc
        else:
            if result:
                return result
        time.sleep(interval)
    raise TimeoutError(f"{what}: not within {timeout:.0f} s (last: {last!r})")


# --- one plain server ---------------------------------------------------------------------------


class Postgres:
    """``initdb`` + ``pg_ctl`` on a free port of 127.0.0.1, trust auth, fsync on."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.data = root / "data"
        self.port = free_port()
        self.log = root / "commands.log"  # initdb's and pg_ctl's output (written by this process)
        self.server_log = root / "server.log"  # the server's own (written by its user)
        self.restarts = 0

    @property
    def admin_url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def init(self, settings: Mapping[str, str] | None = None) -> Postgres:
        """``initdb``; ``settings`` are appended to postgresql.conf as ``name = value``."""
        _run(
            [str(PG_BIN / "initdb"), "-D", str(self.data), "-U", "postgres", "-A", "trust", "-E", "UTF8"],
            self.log,
        )
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.write(
                f"port = {self.port}\nlisten_addresses = '127.0.0.1'\n"
                f"unix_socket_directories = '{self.root}'\n"
                "max_connections = 200\nshared_buffers = 128MB\n"
            )
            conf.writelines(f"{name} = {value}\n" for name, value in (settings or {}).items())
        return self

    def start(self) -> None:
        _run(
            [
                str(PG_BIN / "pg_ctl"),
                "-D",
                str(self.data),
                "-l",
                str(self.server_log),
                "-w",
                "-t",
                "60",
                "start",
            ],
            self.log,
        )

    def restart(self, mode: str) -> None:
        """``pg_ctl restart -m fast|immediate``: every connection is cut; immediate skips the checkpoint."""
        _run(
            [str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "-t", "60", "restart"], self.log
        )
        self.restarts += 1

    def stop(self) -> None:
        with contextlib.suppress(RuntimeError):
            _run([str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop"], self.log)


@contextlib.contextmanager
def own_postgres(
    settings: Mapping[str, str] | None = None, prefix: str = "lineup-chaos-"
) -> Iterator[Postgres]:
    root = _workdir(prefix)
    server = Postgres(root).init(settings)
    try:
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


# --- a Patroni cluster --------------------------------------------------------------------------


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
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.api_port}{path}",
            data=json.dumps(body).encode() if body is not None else None,
            method="POST" if body is not None else "GET",
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as answer:  # noqa: S310 (127.0.0.1 only)
                return answer.status, answer.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

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
        self.etcd = _popen(
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
        wait_for("etcd", lambda: _http_ok(f"http://127.0.0.1:{self.etcd_port}/health"), 30)
        for name in ("pg1", "pg2"):
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
        # The first node bootstraps the cluster and is its primary; the second clones it.
        self._start_node(self.nodes[0])
        wait_for("the first primary", lambda: self.leader() == "pg1", 90)
        self._start_node(self.nodes[1])
        self.wait_healthy(120)

    def _start_node(self, node: Node) -> None:
        node.process = _popen(["patroni", str(node.config)], node.log)

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
            with contextlib.suppress(OSError):
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
        roles = {m.get("name"): (m.get("role"), m.get("state")) for m in members}
        if (
            len(roles) != 2
            or sum(role == "leader" and state == "running" for role, state in roles.values()) != 1
        ):
            return False
        wanted = "sync_standby" if self.synchronous else "replica"
        return any(role == wanted and state in ("running", "streaming") for role, state in roles.values())

    def wait_healthy(self, timeout: float) -> None:
        wait_for("a leader and a streaming standby", self.healthy, timeout, interval=0.2)

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
                _terminate(node.process, timeout=30)
        # A postmaster Patroni could not stop (it was killed mid-way) must not outlive the rig.
        for node in self.nodes:
            with contextlib.suppress(OSError, ValueError, IndexError):
                os.kill(node.postmaster_pid(), signal.SIGKILL)
        if self.etcd is not None:
            _terminate(self.etcd)


def _http_ok(url: str) -> bool:
    with urllib.request.urlopen(url, timeout=2) as answer:  # noqa: S310 (127.0.0.1 only)
        return bool(answer.status == 200)


@contextlib.contextmanager
def patroni_cluster(*, synchronous: bool = True, keep: bool = False) -> Iterator[PatroniCluster]:
    for tool in ("patroni", "etcd"):
        if shutil.which(tool) is None:
            raise SystemExit(
                f"error: {tool} is not installed (`make failover` installs patroni and etcd-server)"
            )
    cluster = PatroniCluster(_workdir("lineup-failover-"), synchronous=synchronous)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
        if keep:
            print(f"kept the rig's files in {cluster.root}")
        else:
            shutil.rmtree(cluster.root, ignore_errors=True)


def database_on(url: str, name: str) -> None:
    """CREATE DATABASE ``name`` through ``url`` (the primary, wherever it is)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')

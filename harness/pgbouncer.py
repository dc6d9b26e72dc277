"""PgBouncer (Debian's package, 1.18) in front of the tests' or a rig's Postgres.

Run as a plain foreground process in a directory of its own (configuration, log, pid file), on a
free port of 127.0.0.1, as ``nobody`` when started by root (PgBouncer refuses to run as root).
``auth_type = trust`` with the users named (the URL's, and ``users``): PgBouncer lets them in
without a password and logs in to Postgres as that same user (the local server's trust decides). ``url(database_url)`` is that database reached through the pooler.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from psycopg.conninfo import conninfo_to_dict

from harness.database import with_hosts
from harness.processes import free_port, launch, log_tail, stop

PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"

_CONFIG = """
[databases]
* = host={host} port={port}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {listen_port}
unix_socket_dir =
auth_type = trust
auth_file = {dir}/users.txt
pool_mode = {mode}
max_client_conn = 2000
default_pool_size = {pool_size}
max_db_connections = {pool_size}
server_reset_query = DISCARD ALL
ignore_startup_parameters = extra_float_digits,options
logfile = {dir}/pgbouncer.log
pidfile = {dir}/pgbouncer.pid
"""


def available() -> bool:
    return os.path.exists(PGBOUNCER)


@dataclass
class PgBouncer:
    port: int
    mode: str
    process: subprocess.Popen[bytes]
    dir: Path

    def url(self, database_url: str) -> str:
        """``database_url`` (user, database, options) through this pooler."""
        return with_hosts(database_url, [("127.0.0.1", self.port)])

    @property
    def log(self) -> Path:
        return self.dir / "pgbouncer.log"


@contextlib.contextmanager
def running_pgbouncer(
    database_url: str,
    *,
    mode: str = "transaction",
    pool_size: int = 20,
    log_dir: Path | None = None,
    users: tuple[str, ...] = (),
) -> Iterator[PgBouncer]:
    """PgBouncer in ``mode`` (transaction or session) in front of ``database_url``'s server."""
    info = conninfo_to_dict(database_url)
    host, port = str(info.get("host") or "127.0.0.1"), int(info.get("port") or 5432)
    # A directory of its own under /tmp, which ``nobody`` can reach (pytest's are private to root);
    # its log is copied to ``log_dir`` at the end.
    with tempfile.TemporaryDirectory(prefix=f"pgbouncer-{mode}-") as name:
        work = Path(name)
        work.chmod(0o755)
        listen_port = free_port()
        names = dict.fromkeys([str(info.get("user") or "postgres"), *users])
        (work / "users.txt").write_text("".join(f'"{name}" ""\n' for name in names))
        config = work / "pgbouncer.ini"
        config.write_text(
            _CONFIG.format(
                host=host, port=port, listen_port=listen_port, mode=mode, pool_size=pool_size, dir=work
            )
        )
        if os.geteuid() == 0:
            account = pwd.getpwnam("nobody")
            for owned in (work, config, work / "users.txt"):
                os.chown(owned, account.pw_uid, account.pw_gid)
        user = "nobody" if os.geteuid() == 0 else None
        process = launch([PGBOUNCER, str(config)], work / "stdout.log", user=user)
        try:
            _wait_port(listen_port, process, work / "stdout.log")
            yield PgBouncer(listen_port, mode, process, work)
        finally:
            stop(process, 10.0)
            if log_dir is not None:
                log_dir.mkdir(parents=True, exist_ok=True)
                for log in ("pgbouncer.log", "stdout.log"):
                    with contextlib.suppress(OSError):
                        shutil.copy(work / log, log_dir / f"pgbouncer-{mode}-{listen_port}-{log}")


def _wait_port(port: int, process: subprocess.Popen[bytes], log: Path, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"pgbouncer exited with {process.returncode}: {log_tail(log)}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return
        time.sleep(0.05)
    raise TimeoutError(f"pgbouncer did not listen on {port} within {timeout}s")

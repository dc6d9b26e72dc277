"""Postgres servers of their own, each under a temp dir, never the machine's.

``Postgres`` is one server from Debian's binaries (``initdb``, ``pg_ctl``) on a free port: the chaos
rig restarts it fast and immediate, the capacity benches measure it alone; ``rigs.patroni`` builds a
cluster with the same helpers.
Their processes run as the ``postgres`` user when started as root (Postgres refuses root), and
everything they made is removed on exit. Nothing here touches a server it did not start.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

from harness.processes import free_port, launch, log_tail

T = TypeVar("T")

PG_BIN = Path(os.environ.get("PG_BIN", "/usr/lib/postgresql/15/bin"))
RUN_AS = "postgres"


def _owner() -> tuple[str | None, int | None, int | None]:
    """Who runs the servers: ``postgres`` when we are root, else ourselves."""
    if os.geteuid() != 0:
        return None, None, None
    entry = pwd.getpwnam(RUN_AS)
    return RUN_AS, entry.pw_uid, entry.pw_gid


#: Where a server whose data may live in memory keeps it: a RAM disk, when the machine has one with
#: room to spare (Docker's default 64 MB /dev/shm has not).
MEMORY = Path("/dev/shm")
MEMORY_NEEDED = 2 * 1024**3


def memory_dir() -> Path | None:
    """``MEMORY`` when it is a writable RAM disk with ``MEMORY_NEEDED`` bytes free; else None."""
    try:
        free = shutil.disk_usage(MEMORY).free
    except OSError:
        return None
    return MEMORY if free >= MEMORY_NEEDED and os.access(MEMORY, os.W_OK) else None


def workdir(prefix: str, *, parent: Path | None = None) -> Path:
    """A fresh directory (under ``parent``, else the temp dir) owned by whoever runs the servers."""
    root = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    user, uid, gid = _owner()
    if user is not None:
        assert uid is not None
        assert gid is not None
        os.chown(root, uid, gid)
    root.chmod(0o700)
    return root


def launch_server(command: Sequence[str], log: Path) -> subprocess.Popen[bytes]:
    """A server's command, as the user that runs the servers, in a process group of its own (its
    children are stopped with it); its output in ``log``, from the log's folder."""
    user, _, _ = _owner()
    return launch(command, log, user=user, new_group=True, cwd=log.parent)


def run_command(command: Sequence[str], log: Path) -> None:
    """A command to its end; an error with its last log lines if it fails."""
    process = launch_server(command, log)
    if process.wait() != 0:
        raise RuntimeError(f"{' '.join(command)} exited {process.returncode}:\n{log_tail(log)}")


def wait_for(what: str, check: Callable[[], T | None], timeout: float, interval: float = 0.1) -> T:
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

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    @property
    def admin_url(self) -> str:
        return self.url()

    def init(self, settings: Mapping[str, str] | None = None) -> Postgres:
        """``initdb``; ``settings`` are appended to postgresql.conf as ``name = value``."""
        run_command(
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
        run_command(
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
        run_command(
            [str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "-t", "60", "restart"], self.log
        )
        self.restarts += 1

    def stop(self) -> None:
        with contextlib.suppress(RuntimeError):
            run_command(
                [str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop"], self.log
            )


@contextlib.contextmanager
def own_postgres(
    settings: Mapping[str, str] | None = None, prefix: str = "lineup-chaos-", *, parent: Path | None = None
) -> Iterator[Postgres]:
    root = workdir(prefix, parent=parent)
    server = Postgres(root).init(settings)
    try:
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)

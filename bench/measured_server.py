"""A Postgres server of the bench's own, set for measuring (``SERVER_SETTINGS``: a production
primary's durability, ``pg_stat_statements`` and ``pg_walinspect``, no checkpoint inside a run),
and the CPU of each of its processes, polled from ``/proc`` (``ServerCpu``)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path

import psycopg
from psycopg import sql

from harness.database import with_database
from harness.measure import process_cpu
from harness.postgres import Postgres, own_postgres
from service.db.migrate import upgrade
from service.manifests import registry_of
from service.settings import Settings

# The server's settings for these measurements: everything a production primary has (fsync,
# synchronous commit, full-page writes), plus the two extensions, and no checkpoint by time or size
# inside a run so that a window's full-page images come from its own first touches only.
SERVER_SETTINGS = {
    "shared_preload_libraries": "'pg_stat_statements'",
    "pg_stat_statements.track": "'top'",
    "pg_stat_statements.max": "5000",
    "cluster_name": "'bench'",
    "checkpoint_timeout": "'30min'",
    "max_wal_size": "'8GB'",
    "fsync": "on",
    "synchronous_commit": "on",
    "full_page_writes": "on",
}


def prepare_server(admin_url: str) -> None:
    """The extensions the meter reads, in the server's ``postgres`` database."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")


@contextlib.contextmanager
def measured_server(database: str) -> Iterator[tuple[Postgres, str]]:
    """A server of our own with ``SERVER_SETTINGS`` and the meter's extensions, and ``database``
    on it migrated to head; yields the server and the database's URL."""
    with own_postgres(SERVER_SETTINGS, prefix="lineup-measured-") as server:
        prepare_server(server.admin_url)
        with psycopg.connect(server.admin_url, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
        url = with_database(server.admin_url, database)
        upgrade(url, registry_of(Settings()))
        yield server, url


def postmaster_pid(data_dir: Path) -> int:
    return int(data_dir.joinpath("postmaster.pid").read_text().split()[0])


class ServerCpu(threading.Thread):
    """Polls the CPU (``/proc``) of every process of one server: the backends of the measured
    database, the backends of other databases (the meter's own), and each background process
    (walwriter, checkpointer, autovacuum, ...) by its title. A process that exits between polls
    loses at most the last interval."""

    def __init__(
        self, postmaster: int, database: str, ignore_pids: frozenset[int] = frozenset(), interval: float = 0.1
    ) -> None:
        super().__init__(name="server-cpu", daemon=True)
        self._postmaster = postmaster
        self._database = database
        self._ignore = ignore_pids
        self._interval = interval
        self._halt = threading.Event()
        self._first: dict[int, float] = {}
        self._last: dict[int, float] = {}
        self._kind: dict[int, str] = {}

    def _children(self) -> list[int]:
        try:
            text = Path(f"/proc/{self._postmaster}/task/{self._postmaster}/children").read_text()
        except OSError:
            return []
        return [int(pid) for pid in text.split()]

    def _classify(self, pid: int) -> str | None:
        try:
            title = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        except OSError:
            return None
        # "postgres: bench: <user> <database> <host>(<port>) <state>" or "postgres: bench: walwriter"
        rest = title.removeprefix("postgres: ").removeprefix("bench: ")
        words = rest.split()
        if len(words) >= 3 and ("(" in words[2] or words[2] == "[local]"):
            return "backends" if words[1] == self._database else "other databases"
        if rest.startswith("autovacuum worker"):
            return "autovacuum"
        return rest.split(" ")[0] if rest else None

    def _poll(self, initial: bool) -> None:
        for pid in self._children():
            if pid in self._ignore:
                continue
            if pid not in self._kind:
                kind = self._classify(pid)
                if kind is None:
                    continue
                self._kind[pid] = kind
            cpu = process_cpu(pid)
            if pid not in self._first:
                self._first[pid] = cpu if initial else 0.0
            self._last[pid] = max(cpu, self._last.get(pid, 0.0))

    def run(self) -> None:
        while not self._halt.wait(self._interval):
            self._poll(initial=False)

    def begin(self) -> None:
        self._poll(initial=True)
        self.start()

    def finish(self) -> dict[str, float]:
        self._halt.set()
        self.join(10)
        self._poll(initial=False)
        spent: dict[str, float] = {}
        for pid, last in self._last.items():
            kind = self._kind[pid]
            spent[kind] = spent.get(kind, 0.0) + last - self._first[pid]
        return spent

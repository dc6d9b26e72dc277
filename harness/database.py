"""Where the tests' Postgres comes from, one fresh database per test, and the throwaway databases
of the benches and the rigs.

Order for the tests: ``TEST_DATABASE_URL`` or ``DATABASE_URL`` when set; else a testcontainers
Postgres when a Docker engine answers; else a server of the tests' own from this machine's Postgres
binaries with its data on the RAM disk; else an embedded server from the ``pgserver`` package. The
schema is migrated once into a template database (through Alembic, never ``create_all``) and every
test gets a clone (``CREATE DATABASE ... TEMPLATE``). The benches and the rigs use the server
``DATABASE_URL`` names, or the local one.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import socket
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from urllib.parse import quote, urlencode

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict
from sqlalchemy.engine import make_url


def with_database(url: str, name: str) -> str:
    return make_url(url).set(database=name).render_as_string(hide_password=False)


#: Where this run's Postgres came from, once the session has one (the summary prints it).
USED: list[str] = []
TCP_HINT = (
    "run them against a server of your own: "
    "TEST_DATABASE_URL=postgresql://postgres@127.0.0.1:5432/postgres make test"
)


def tcp_address(url: str) -> tuple[str, int]:
    """The server's TCP host and port; tests that put a proxy in front of it skip a socket-only one."""
    info = conninfo_to_dict(url)
    host = str(info.get("host") or "127.0.0.1")
    if host.startswith("/") or "," in host:
        pytest.skip(
            f"needs a single Postgres server reached over TCP, not {USED[-1] if USED else url}; {TCP_HINT}"
        )
    return host, int(info.get("port") or 5432)


def shown(url: str) -> str:
    """A URL for a log line: its password hidden."""
    return make_url(url).render_as_string(hide_password=True)


def with_user(url: str, user: str) -> str:
    """``url`` connecting as ``user`` (servers of the tests and rigs trust local connections)."""
    return make_url(url).set(username=user, password=None).render_as_string(hide_password=False)


def with_hosts(url: str, hosts: Sequence[tuple[str, int]], **params: str) -> str:
    """``url`` (user, password, database and options kept) aimed at ``hosts``, in the multi-host
    form when there are several: what a deployment's URL for a primary and its standbys looks like."""
    info = {k: str(v) for k, v in conninfo_to_dict(url).items() if k not in ("host", "hostaddr", "port")}
    user = quote(info.pop("user", ""), safe="")
    password = info.pop("password", None)
    credentials = f"{user}:{quote(password, safe='')}@" if password else (f"{user}@" if user else "")
    database = quote(info.pop("dbname", ""), safe="")
    netloc = ",".join(f"{host}:{port}" for host, port in hosts)
    query = urlencode({**info, **params})
    return f"postgresql://{credentials}{netloc}/{database}" + (f"?{query}" if query else "")


def _docker_answers() -> bool:
    """True when a Docker engine answers its ping on the local socket (or DOCKER_HOST is set)."""
    if os.environ.get("DOCKER_HOST"):
        return True
    path = "/var/run/docker.sock"
    if not os.path.exists(path):
        return False
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(2)
            sock.connect(path)
            sock.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
            return b" 200 " in sock.recv(64)
    except OSError:
        return False


@contextlib.contextmanager
def server_url() -> Iterator[str]:
    """A URL of a Postgres server where the tests may create and drop databases."""
    explicit = os.environ.get("TEST_DATABASE_URL") or os.environ.get("DATABASE_URL")
    if explicit:
        name = "TEST_DATABASE_URL" if os.environ.get("TEST_DATABASE_URL") else "DATABASE_URL"
        USED.append(f"{name}={shown(explicit)}")
        yield explicit
        return
    if _docker_answers():
        from testcontainers.postgres import PostgresContainer

        with PostgresContainer("postgres:16-alpine", driver=None) as container:
            USED.append("a throwaway Docker container (testcontainers, postgres:16-alpine)")
            yield container.get_connection_url()
        return
    if (own := _machine_postgres()) is not None:
        with own as url:
            yield url
        return
    root = Path(tempfile.mkdtemp(prefix="lineup-pg-"))
    runtime_dir = root / "run"
    runtime_dir.mkdir(mode=0o700)
    os.environ.setdefault("XDG_RUNTIME_DIR", str(runtime_dir))
    from pgserver.postgres_server import get_server

    server = get_server(root / "data", cleanup_mode="delete")
    USED.append(f"an embedded Postgres (pgserver, a Unix socket in {root}; no TEST_DATABASE_URL set)")
    try:
        yield str(server.get_uri())
    finally:
        server.cleanup()


#: The tests' own server keeps its data here, in memory: a test's database is a clone of a 9 MB
#: template, and on this machine's disk writing a clone's WAL took 0.2-0.5 s of every test's setup;
#: in memory, 0.02 s. Nothing in the suite tests this server's durability (the tests that crash a
#: Postgres run one of their own).
TEST_SERVER_PREFIX = "lineup-tests-"
TEST_SERVER_SETTINGS = {
    # A clone, a drop and a test's commits write WAL; checkpoints keep it to this much memory.
    "max_wal_size": "512MB",
    "max_connections": "300",
}


def _machine_postgres() -> contextlib.AbstractContextManager[str] | None:
    """A server of the tests' own from this machine's Postgres binaries, over TCP on 127.0.0.1, its
    data on the RAM disk (in the temp dir when there is none to spare); None when the machine has no
    Postgres binaries."""
    from harness import postgres

    if not (postgres.PG_BIN / "initdb").exists():
        return None
    parent = postgres.memory_dir()
    if parent is not None:
        remove_abandoned_servers(parent)

    @contextlib.contextmanager
    def running() -> Iterator[str]:
        with postgres.own_postgres(TEST_SERVER_SETTINGS, TEST_SERVER_PREFIX, parent=parent) as server:
            (server.root / "owner.pid").write_text(str(os.getpid()))
            where = "in memory under" if parent is not None else "on disk under"
            USED.append(
                f"a Postgres of the tests' own ({postgres.PG_BIN}, 127.0.0.1:{server.port}, its data"
                f" {where} {server.root}; no TEST_DATABASE_URL set)"
            )
            yield server.admin_url

    return running()


def remove_abandoned_servers(parent: Path) -> None:
    """The servers earlier runs left when they were killed (their pytest gone, their server not):
    stopped and their memory given back."""
    from harness import postgres

    for root in parent.glob(f"{TEST_SERVER_PREFIX}*"):
        try:
            owner = int((root / "owner.pid").read_text())
        except (OSError, ValueError):
            with contextlib.suppress(OSError):  # gone meanwhile: another run removed it
                if time.time() - root.stat().st_mtime < 600:
                    continue  # a run still making its server
        else:
            with contextlib.suppress(ProcessLookupError):
                with contextlib.suppress(PermissionError):  # someone else's process: alive
                    os.kill(owner, 0)
                continue  # a run still going
        postgres.Postgres(root).stop()
        shutil.rmtree(root, ignore_errors=True)


def admin_execute(url: str, *statements: str | sql.Composable) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)  # type: ignore[arg-type]


def create_database(server: str, name: str, *, template: str | None = None) -> None:
    """``CREATE DATABASE name`` on the server ``server`` leads to (the primary, for a multi-host URL)."""
    statement = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
    if template is not None:
        statement += sql.SQL(" TEMPLATE {}").format(sql.Identifier(template))
    admin_execute(server, statement)


def drop_database(server: str, name: str) -> None:
    admin_execute(server, sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


class DatabaseFactory:
    """Clones the migrated template into a fresh database per test.

    A clone takes tens of milliseconds of the server's time and a drop some more; neither need
    hold up a test. One thread of its own makes the next clone while a test runs (``create`` takes
    it, then orders the next one) and drops the databases the tests are done with, in the order
    they came; ``close`` waits for it and drops the clone no test took."""

    def __init__(self, server: str, template: str) -> None:
        self.server = server
        self.template = template
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lineup-databases")
        self._next: Future[str] | None = None
        self._drops: list[Future[None]] = []

    def _clone(self) -> str:
        """A clone whose sessions commit without waiting for the WAL flush (``synchronous_commit
        = off``): a commit is as visible and as atomic as before, only a crash of this server
        could lose the last ones, and no test crashes it (the tests that crash a Postgres run one
        of their own, harness/postgres.py). A commit costs one flush less: ~1 to 4 ms here."""
        name = f"lineup_test_{uuid.uuid4().hex[:16]}"
        create_database(self.server, name, template=self.template)
        admin_execute(
            self.server,
            sql.SQL("ALTER DATABASE {} SET synchronous_commit = off").format(sql.Identifier(name)),
        )
        return name

    def create(self) -> str:
        """A clone of the template no one has used (made ahead, while the previous test ran)."""
        spare, self._next = self._next, None
        name = spare.result() if spare is not None else self._clone()
        self._next = self._worker.submit(self._clone)
        return name

    def create_empty(self) -> str:
        """A database with nothing in it (dropped by ``drop`` like the others)."""
        name = f"lineup_test_{uuid.uuid4().hex[:16]}"
        create_database(self.server, name)
        return name

    def drop(self, name: str) -> None:
        """``DROP DATABASE ... WITH (FORCE)``, done after the caller has moved on; an error of it
        is raised by ``close``."""
        self._drops.append(self._worker.submit(drop_database, self.server, name))

    def close(self) -> None:
        """Wait for the pending drops (raising the first error) and drop the unused clone."""
        spare, self._next = self._next, None
        if spare is not None:
            self.drop(spare.result())
        self._worker.shutdown(wait=True)
        for drop in self._drops:
            drop.result()


@contextlib.contextmanager
def scratch_database(server: str, name: str) -> Iterator[str]:
    """``CREATE DATABASE name`` (its URL), dropped ``WITH (FORCE)`` on the way out."""
    create_database(server, name)
    try:
        yield with_database(server, name)
    finally:
        drop_database(server, name)


@contextlib.contextmanager
def migrated_database(server: str, name: str) -> Iterator[str]:
    """``scratch_database`` migrated to head."""
    from service.db.migrate import upgrade
    from service.manifests import registry_of
    from service.settings import Settings

    with scratch_database(server, name) as url:
        upgrade(url, registry_of(Settings()))  # the apps the environment's settings name
        yield url


@contextlib.contextmanager
def migrated_template(server: str) -> Iterator[DatabaseFactory]:
    template = f"lineup_template_{uuid.uuid4().hex[:12]}"
    with migrated_database(server, template):
        factory = DatabaseFactory(server, template)
        try:
            yield factory
        finally:
            factory.close()


LOCAL_SERVER = "postgresql://postgres@127.0.0.1:5432/postgres"


def named_server() -> str:
    """The server the benches and the rigs make their databases on: ``DATABASE_URL``, or the local one."""
    url = os.environ.get("DATABASE_URL") or LOCAL_SERVER
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


#: A migrated database on ``named_server()`` to copy instead of migrating afresh (the benches' smoke
#: test sets it: a copy takes tens of milliseconds, a migration seconds).
MIGRATED_TEMPLATE = "LINEUP_MIGRATED_TEMPLATE"


@contextlib.contextmanager
def throwaway_database(kind: str) -> Iterator[str]:
    """A database ``bench_<kind>_<random>`` on ``named_server()``, migrated (or a copy of the
    migrated database ``LINEUP_MIGRATED_TEMPLATE`` names); dropped after."""
    name = f"bench_{kind}_{secrets.token_hex(4)}"
    template = os.environ.get(MIGRATED_TEMPLATE)
    if not template:
        with migrated_database(named_server(), name) as url:
            yield url
        return
    create_database(named_server(), name, template=template)
    try:
        yield with_database(named_server(), name)
    finally:
        drop_database(named_server(), name)

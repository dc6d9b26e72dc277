"""A Citus cluster on this machine for ``make citus`` and the tests that need one: the extension
(installed already, or — for the rig — built from the source tarball named by ``CITUS_SRC``) and a
coordinator with workers, each an ``initdb`` of its own under a temp dir on a free port of
127.0.0.1.

The build is kept under ``.cache/citus/<version>/`` (git-ignored): a second run finds the extension
installed and builds nothing. The tarball is never changed: it is extracted there, and the one
compatibility fix Debian's PostgreSQL 15.20 needs is applied to the extracted copy
(``have_createdb_privilege``, see :func:`patch_compat`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tarfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

from harness.postgres import PG_BIN, Postgres, wait_for, workdir
from harness.processes import ROOT

CACHE = ROOT / ".cache" / "citus"
PG_CONFIG = PG_BIN / "pg_config"
# Debian's packages the build needs (the vendor README's list).
BUILD_DEPENDS = (
    "postgresql-server-dev-15",
    "libcurl4-openssl-dev",
    "liblz4-dev",
    "libzstd-dev",
    "libkrb5-dev",
    "libssl-dev",
    "libselinux1-dev",
    "libxslt1-dev",
    "libpam0g-dev",
    "libreadline-dev",
    "zlib1g-dev",
    "libicu-dev",
    "autoconf",
    "flex",
    "bison",
    "make",
    "gcc",
)
COMPAT_HEADER = Path("src/include/pg_version_compat.h")
COMPAT_FIX = "#define have_createdb_privilege citus_compat_have_createdb_privilege\n"
NODE_SETTINGS = {
    "shared_preload_libraries": "'citus'",
    "max_prepared_transactions": "100",
    "max_connections": "300",
    "wal_level": "logical",
    # the nodes' connections to each other on loopback, without TLS (the servers' user need not
    # read the caller's ~/.postgresql)
    "citus.node_conninfo": "'sslmode=disable'",
}


class CitusUnavailableError(Exception):
    """Neither an installed ``citus`` extension nor ``CITUS_SRC``: the rig skips."""


def pkglibdir() -> Path:
    return Path(subprocess.check_output([str(PG_CONFIG), "--pkglibdir"], text=True).strip())


def installed() -> bool:
    """``citus.so`` in this PostgreSQL's library folder and its control file beside the others."""
    if not PG_CONFIG.exists():
        return False
    share = Path(subprocess.check_output([str(PG_CONFIG), "--sharedir"], text=True).strip())
    return (pkglibdir() / "citus.so").exists() and (share / "extension" / "citus.control").exists()


def _missing_packages() -> list[str]:
    missing = []
    for package in BUILD_DEPENDS:
        status = subprocess.run(
            ["dpkg-query", "-W", "-f=${Status}", package], capture_output=True, text=True, check=False
        )
        if "install ok installed" not in status.stdout:
            missing.append(package)
    return missing


def install_build_dependencies() -> None:
    missing = _missing_packages()
    if not missing:
        return
    print(f"citus: installing the build dependencies with apt-get: {' '.join(missing)}", flush=True)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-q"], check=True, env=env)
    subprocess.run(
        ["apt-get", "install", "-y", "-q", "--no-install-recommends", *missing], check=True, env=env
    )


def patch_compat(source: Path) -> bool:
    """Rename Citus's own ``static inline have_createdb_privilege`` (for PG < 16), which PG 15.20's
    ``commands/dbcommands.h`` now declares extern; True when the line was added."""
    header = source / COMPAT_HEADER
    text = header.read_text()
    if COMPAT_FIX in text:
        return False
    marker = "static inline bool\nhave_createdb_privilege"
    if marker not in text:
        return False  # a Citus without the copy: nothing to rename
    header.write_text(text.replace(marker, COMPAT_FIX + marker, 1))
    return True


def build(tarball: Path, jobs: int = 2) -> None:
    """Extract ``tarball`` under the cache, fix, configure, ``make -j{jobs}`` and ``make install``;
    each step is skipped when its stamp says it is done."""
    install_build_dependencies()
    target = CACHE / tarball.name.removesuffix(".tar.gz")
    source = target / "src"
    if not (target / ".extracted").exists():
        shutil.rmtree(target, ignore_errors=True)
        source.mkdir(parents=True)
        with tarfile.open(tarball) as archive:
            members = archive.getmembers()
            top = members[0].name.split("/", 1)[0] if members else ""
            for member in members:
                parts = member.name.split("/", 1)
                if len(parts) < 2 or parts[0] != top:
                    continue
                member.name = parts[1]
                archive.extract(member, source, filter="fully_trusted")
        (target / ".extracted").touch()
    if patch_compat(source):
        print("citus: renamed Citus's have_createdb_privilege for PostgreSQL 15.20", flush=True)
    log = target / "build.log"
    steps = [
        (".configured", ["./configure", f"PG_CONFIG={PG_CONFIG}"]),
        (".built", ["make", f"-j{jobs}"]),
        (".installed", ["make", "install"]),
    ]
    for stamp, command in steps:
        if stamp == ".installed" and installed() and (target / stamp).exists():
            continue
        if stamp != ".installed" and (target / stamp).exists():
            continue
        print(f"citus: {' '.join(command)} (log {log})", flush=True)
        with log.open("ab") as handle:
            code = subprocess.call(command, cwd=source, stdout=handle, stderr=subprocess.STDOUT)
        if code != 0:
            raise RuntimeError(f"{' '.join(command)} exited {code}; the end of {log}:\n{_tail(log)}")
        (target / stamp).touch()


def _tail(log: Path, lines: int = 30) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def ensure_extension() -> str:
    """The extension, ready: installed already, or built from ``CITUS_SRC``; how, in a line.
    ``CitusUnavailableError`` when neither."""
    if installed():
        return f"citus: using the installed extension ({pkglibdir() / 'citus.so'})"
    src = os.environ.get("CITUS_SRC")
    if not src:
        raise CitusUnavailableError(
            "no citus extension is installed and CITUS_SRC (a Citus source tarball) is not set"
        )
    tarball = Path(src)
    if not tarball.is_file():
        raise CitusUnavailableError(f"CITUS_SRC={src} is not a file")
    build(tarball)
    if not installed():
        raise RuntimeError("the build finished but citus.so is not installed")
    return f"citus: built and installed from {tarball}"


@dataclass
class Cluster:
    coordinator: Postgres
    workers: list[Postgres]
    database: str = "lineup"
    roots: list[Path] = field(default_factory=list)

    def url(self, node: Postgres | None = None) -> str:
        return (node or self.coordinator).url(self.database)

    @property
    def nodes(self) -> list[Postgres]:
        return [self.coordinator, *self.workers]


def _sql(url: str, statement: str, *params: object) -> list[tuple[object, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        cursor = conn.execute(statement, params or None)
        return cursor.fetchall() if cursor.description else []


@contextlib.contextmanager
def citus_cluster(
    workers: int = 2,
    database: str = "lineup",
    settings: dict[str, str] | None = None,
    *,
    parent: Path | None = None,
) -> Iterator[Cluster]:
    """A coordinator and ``workers`` workers, the extension created in ``database`` on each, the
    coordinator's metadata naming itself and every worker; everything removed on exit. ``settings``
    are added to (or replace) ``NODE_SETTINGS`` on every node; the nodes' folders are made under
    ``parent`` (the temp dir when None; the tests give the RAM disk, ``harness.postgres.memory_dir``)."""
    node_settings = {**NODE_SETTINGS, **(settings or {})}
    started = [
        Postgres(workdir(f"lineup-citus-{'coordinator' if n == 0 else f'worker{n}'}-", parent=parent))
        for n in range(workers + 1)
    ]

    def start_node(node: Postgres) -> None:
        node.init(node_settings).start()
        _sql(node.admin_url, f"CREATE DATABASE {database}")
        _sql(node.url(database), "CREATE EXTENSION citus")

    try:
        # The nodes are independent servers until the coordinator names the workers: each is
        # made (initdb, start, its database with the extension) at the same time as the others.
        with ThreadPoolExecutor(max_workers=len(started)) as pool:
            for done in [pool.submit(start_node, node) for node in started]:
                done.result()
        cluster = Cluster(started[0], started[1:], database)
        coordinator = cluster.url()
        _sql(coordinator, "SELECT citus_set_coordinator_host('127.0.0.1', %s)", cluster.coordinator.port)
        for worker in cluster.workers:
            _sql(coordinator, "SELECT citus_add_node('127.0.0.1', %s)", worker.port)
        wait_for(
            "the workers active in the coordinator's metadata",
            lambda: len(_sql(coordinator, "SELECT * FROM citus_get_active_worker_nodes()")) == workers,
            30,
        )
        yield cluster
    finally:
        for node in reversed(started):
            node.stop()
            shutil.rmtree(node.root, ignore_errors=True)

"""Fixtures shared by every layer: a real Postgres, a fresh migrated database per test."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Self

import psycopg
import pytest
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings
from litestar.testing import AsyncTestClient
from psycopg.rows import dict_row

from harness import database, processes
from harness.database import DatabaseFactory, migrated_template, server_url, with_database
from harness.tokens import AGENT_TOKEN as AGENT_TOKEN  # re-exported: the tests import them from here
from harness.tokens import HOST_TOKEN as HOST_TOKEN
from harness.tokens import OPERATOR_TOKEN as OPERATOR_TOKEN
from service.app import create_app
from service.logging import configure_logging
from service.manifests import Registry, registry_of
from service.settings import Settings, load_settings

ROOT = Path(__file__).resolve().parents[1]
HOST_SESSION_SECRET = "host-session-secret-for-tests-0123456789"
AGENT = {"Authorization": f"Bearer {AGENT_TOKEN}"}
HOST = {"Authorization": f"Bearer {HOST_TOKEN}"}
OPERATOR = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
# A well-formed id no row has: fixed, so that every run (and every xdist worker) collects the same
# parametrized tests.
UNKNOWN_UUID = "6f1c2a9e-0d3b-4c55-9e2a-1b7d0c3e4f58"

# Property tests check rules, not speed: on a loaded CI machine one example can take longer than
# Hypothesis's 200 ms default deadline, which it reports as a flaky failure of a rule that holds.
hypothesis_settings.register_profile("lineup", deadline=None, suppress_health_check=[HealthCheck.too_slow])
hypothesis_settings.load_profile("lineup")


@pytest.hookimpl(trylast=True)  # after the slowest durations
def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Which Postgres the run used, on the last lines (``-q`` hides the header)."""
    for used in database.USED:
        terminalreporter.write_line(f"postgres: {used}")


@pytest.fixture(scope="session", autouse=True)
def _structured_logs_to_stderr() -> None:
    """As in the real processes: JSON logs on stderr, never mixed into a command's stdout."""
    configure_logging()


@pytest.fixture(scope="module", autouse=True)
def _one_chromium_per_module() -> Iterator[None]:
    """The browser tests of a module share one chromium (each test a fresh context of it); it is
    stopped when the module ends, before any asyncio test of the next module runs."""
    yield
    from tests.support.browser import close_module_chromium  # it imports this module

    close_module_chromium()


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    with server_url() as url:
        yield url


@pytest.fixture(scope="session")
def database_factory(pg_server: str) -> Iterator[DatabaseFactory]:
    with migrated_template(pg_server) as factory:
        yield factory


@pytest.fixture
def database_url(database_factory: DatabaseFactory) -> Iterator[str]:
    """A fresh database cloned from the migrated template, dropped after the test."""
    name = database_factory.create()
    try:
        yield with_database(database_factory.server, name)
    finally:
        database_factory.drop(name)


@pytest.fixture
def db(database_url: str) -> Iterator[psycopg.Connection[dict[str, Any]]]:
    """A direct connection for assertions (autocommit, dict rows)."""
    with psycopg.connect(database_url, autocommit=True, row_factory=dict_row) as conn:
        yield conn


@pytest.fixture(scope="session")
def registry() -> Registry:
    """The registry of the default settings: the shipped apps."""
    return registry_of(Settings())


def registry_with(*folders: Path) -> Registry:
    """The registry of a service whose APP_FOLDERS names ``folders`` (test-only apps) besides the
    default app set, as ``serve`` and ``migrate`` build it."""
    return registry_of(Settings(app_folders=",".join(str(folder) for folder in folders)))


def make_settings(database_url: str, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "database_url": database_url,
        "agent_token": AGENT_TOKEN,
        "host_token": HOST_TOKEN,
        "operator_token": OPERATOR_TOKEN,
        "manifests_dir": ROOT / "service" / "apps",
        "host_session_secret": HOST_SESSION_SECRET,
        # The test clients speak plain http.
        "cookie_secure": False,
        # Litestar's test clients send Host: testserver.local (service.host_names).
        "allowed_hosts": "testserver.local testserver",
    }
    values.update(overrides)
    return load_settings("serve", **values)


@pytest.fixture
def settings(database_url: str) -> Settings:
    return make_settings(database_url)


@pytest.fixture
async def client(settings: Settings, registry: Registry) -> AsyncIterator[AsyncTestClient[Any]]:
    """The service in-process (no sweeper: tests drive deadlines explicitly)."""
    app = create_app(settings, registry, sweeper=False)
    async with AsyncTestClient(app=app) as test_client:
        yield test_client


@pytest.fixture
async def swept_client(settings: Settings, registry: Registry) -> AsyncIterator[AsyncTestClient[Any]]:
    """The service in-process with its deadline sweeper running."""
    app = create_app(settings, registry, sweeper=True)
    async with AsyncTestClient(app=app) as test_client:
        yield test_client


class ServiceProcess(processes.ServiceProcess):
    """``python -m service serve`` as a real process on a free port, with the tests' tokens."""

    def __init__(self, database_url: str, log_dir: Path, **env: str) -> None:
        settings = {
            "AGENT_TOKEN": AGENT_TOKEN,
            "HOST_TOKEN": HOST_TOKEN,
            "OPERATOR_TOKEN": OPERATOR_TOKEN,
            "HOST_SESSION_SECRET": HOST_SESSION_SECRET,
            "COOKIE_SECURE": "false",
            **env,
        }
        super().__init__(database_url, log_dir, env=settings)
        self.env.setdefault("PUBLIC_ORIGIN", self.base_url)

    def start(self) -> Self:
        """Started, and answering ``/healthz``."""
        super().start()
        try:
            self.wait_http(f"{self.base_url}/healthz", 60.0)  # a loaded CI machine starts slowly
        except BaseException:
            self.stop()  # no fixture knows of it yet: it would outlive the test
            raise
        return self


def migrate(database_url: str, **env: str) -> None:
    """``python -m service migrate`` against ``database_url`` with the settings ``env`` (say, the
    APP_FOLDERS a service is then served with)."""
    done = subprocess.run(
        [sys.executable, "-m", "service", "migrate"],
        cwd=ROOT,
        env={**os.environ, "DATABASE_URL": database_url, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]


@contextmanager
def service_on_own_database(factory: DatabaseFactory, log_dir: Path, **env: str) -> Iterator[ServiceProcess]:
    """A service process on a database of its own (for a module-scoped fixture): both go at the end,
    even when the service failed to start. With APP_FOLDERS in ``env``, the database is migrated
    with them first (their database code and grants), as a deployment would be."""
    with services_on_own_database(factory, log_dir, env) as (process,):
        yield process


@contextmanager
def services_on_own_database(
    factory: DatabaseFactory, log_dir: Path, *envs: dict[str, str]
) -> Iterator[list[ServiceProcess]]:
    """Replicas on one database of their own, one per settings in ``envs``, started in that order;
    all go at the end, with the database, even when one failed to start."""
    name = factory.create()
    processes: list[ServiceProcess] = []
    try:
        for folders in {env["APP_FOLDERS"] for env in envs if "APP_FOLDERS" in env}:
            migrate(with_database(factory.server, name), APP_FOLDERS=folders)
        for env in envs:  # each listening before the next picks a free port
            processes.append(ServiceProcess(with_database(factory.server, name), log_dir, **env))
            processes[-1].start()
        yield processes
    finally:
        for process in processes:
            if process.process is not None and process.process.poll() is None:
                process.stop()
        factory.drop(name)


@pytest.fixture
def service_process(database_url: str, tmp_path: Path) -> Iterator[Callable[..., ServiceProcess]]:
    started: list[ServiceProcess] = []

    def factory(**env: str) -> ServiceProcess:
        process = ServiceProcess(database_url, tmp_path, **env).start()
        started.append(process)
        return process

    yield factory
    for process in started:
        if process.process is not None and process.process.poll() is None:
            process.stop()

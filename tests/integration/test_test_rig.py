"""The test rig says what it runs on: a test that needs Postgres over TCP says how to give it one,
and the run's last lines name the Postgres it used."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from harness.database import TEST_SERVER_PREFIX, remove_abandoned_servers, tcp_address
from tests.conftest import ROOT


def with_password(url: str, password: str) -> str:
    """The URL with a password (a server that trusts its clients ignores it)."""
    return str(make_url(url).set(password=password).render_as_string(hide_password=False))


def test_a_test_that_needs_tcp_says_how_to_run_it_on_a_socket_only_server() -> None:
    with pytest.raises(pytest.skip.Exception) as skipped:
        tcp_address("postgresql://postgres@/postgres?host=/tmp/lineup-pg-x")
    assert "TEST_DATABASE_URL=postgresql://" in str(skipped.value)
    assert tcp_address("postgresql://u:p@db.example:6543/x") == ("db.example", 6543)


def test_a_run_ends_naming_its_postgres_without_its_password(pg_server: str) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/integration/test_schema_drift.py",
        ],
        cwd=ROOT,
        env={**os.environ, "TEST_DATABASE_URL": with_password(pg_server, "not-for-the-log")},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "postgres: TEST_DATABASE_URL=" in done.stdout.splitlines()[-2], done.stdout
    assert "not-for-the-log" not in done.stdout


def test_a_server_a_killed_run_left_in_memory_is_removed_by_the_next_run(tmp_path: Path) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    abandoned = tmp_path / f"{TEST_SERVER_PREFIX}abandoned"
    running = tmp_path / f"{TEST_SERVER_PREFIX}running"
    being_made = tmp_path / f"{TEST_SERVER_PREFIX}being-made"
    other = tmp_path / "someone-elses"
    for directory in (abandoned, running, being_made, other):
        directory.mkdir()
    (abandoned / "owner.pid").write_text(str(gone.pid))
    (running / "owner.pid").write_text(str(os.getpid()))

    remove_abandoned_servers(tmp_path)

    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(
        path.name for path in (running, being_made, other)
    )

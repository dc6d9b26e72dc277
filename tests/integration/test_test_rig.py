"""The test rig says what it runs on: a test that needs Postgres over TCP says how to give it one,
and the run's last lines name the Postgres it used."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from sqlalchemy.engine import make_url

from harness.database import tcp_address
from tests.conftest import ROOT


def with_password(url: str, password: str) -> str:
    """The URL with a password (a server that trusts its clients ignores it)."""
    return str(make_url(url).set(password=password).render_as_string(hide_password=False))


def test_a_test_that_needs_tcp_says_how_to_run_it_on_a_socket_only_server() -> None:
    with pytest.raises(pytest.skip.Exception) as skipped:
        tcp_address("postgresql://postgres@/postgres?host=/tmp/lineup-pg-x")
    assert "TEST_DATABASE_URL=postgresql://" in str(skipped.value)
    assert tcp_address("postgresql://u:p@db.example:6543/x") == ("db.example", 6543)


def test_a_run_ends_naming_its_postgres_without_its_password() -> None:
    url = os.environ.get("TEST_DATABASE_URL") or os.environ.get("DATABASE_URL")
    if not url:
        pytest.skip("runs the rig against TEST_DATABASE_URL; none is set")
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
        env={**os.environ, "TEST_DATABASE_URL": with_password(url, "not-for-the-log")},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "postgres: TEST_DATABASE_URL=" in done.stdout.splitlines()[-2], done.stdout
    assert "not-for-the-log" not in done.stdout

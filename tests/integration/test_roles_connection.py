"""``python -m service roles`` as compose and Kubernetes run it: started before Postgres takes
connections it waits (a bounded time, one line per try) and then succeeds; on a database whose
encoding is SQL_ASCII it does the same as on a UTF8 one."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from pathlib import Path

import psycopg
from psycopg import sql

from harness.database import admin_execute, drop_database, tcp_address, with_database
from harness.processes import free_port
from service.db import roles
from tests.integration.test_roles import drop_roles, unique_names

ROOT = Path(__file__).resolve().parents[2]


def roles_env(database_url: str, made: roles.Names, **extra: str) -> dict[str, str]:
    return {
        "PATH": "/usr/bin:/bin",
        "DATABASE_URL": database_url,
        **{f"DB_{kind.upper()}_ROLE": made.of(kind) for kind in roles.KINDS},
        **extra,
    }


def test_roles_waits_for_a_database_that_is_not_there_yet_then_makes_the_roles(database_url: str) -> None:
    """A port that refuses at first and forwards to Postgres later (Postgres still starting)."""
    host, pg_port = tcp_address(database_url)
    port = free_port()
    url = database_url.replace(f":{pg_port}/", f":{port}/", 1)
    made = unique_names()
    forwarder = [sys.executable, "-c", FORWARD, str(port), host, str(pg_port)]
    child = subprocess.Popen(
        [sys.executable, "-m", "service", "roles"],
        env=roles_env(url, made, ROLES_CONNECT_SECONDS="60"),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    proxy = None
    try:
        deadline = time.monotonic() + 30
        assert child.stderr is not None
        first = child.stderr.readline()  # the first refused try, before anything listens
        assert "roles: cannot connect to the database yet (try 1" in first, first
        assert time.monotonic() < deadline
        proxy = subprocess.Popen(forwarder)
        out, err = child.communicate(timeout=60)
        assert child.returncode == 0, first + err
        assert f"created role {made.runtime}" in out
    finally:
        child.kill()
        if proxy is not None:
            proxy.kill()
            proxy.wait()
        drop_roles(database_url, made)


def test_roles_gives_up_after_roles_connect_seconds_naming_the_setting() -> None:
    port = free_port()  # nothing listens there
    result = subprocess.run(
        [sys.executable, "-m", "service", "roles"],
        env=roles_env(
            f"postgresql://admin:Xk29fjqL0pZ7wqA@127.0.0.1:{port}/lineup",
            unique_names(),
            ROLES_CONNECT_SECONDS="1",
        ),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "ROLES_CONNECT_SECONDS" in result.stderr and "Xk29" not in result.stderr
    assert "roles: cannot connect to the database yet (try 1" in result.stderr


def test_roles_works_on_a_sql_ascii_database(database_url: str) -> None:
    """Psycopg hands back bytes for text on a SQL_ASCII connection; roles asks for UTF8."""
    name = f"sqlascii_{uuid.uuid4().hex[:10]}"
    admin_execute(
        database_url,
        sql.SQL(
            "CREATE DATABASE {} ENCODING 'SQL_ASCII' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0"
        ).format(sql.Identifier(name)),
    )
    url = with_database(database_url, name)
    made = unique_names()
    try:
        with psycopg.connect(url) as conn:
            encoding = conn.execute("SHOW server_encoding").fetchone()
            assert encoding == (b"SQL_ASCII",)  # bytes: what broke roles before
        result = subprocess.run(
            [sys.executable, "-m", "service", "roles"],
            env=roles_env(url, made),
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 0, result.stderr
        assert "b'" not in result.stdout + result.stderr
        assert f"granted CONNECT on the database to {made.runtime}" in result.stdout
        again = subprocess.run(
            [sys.executable, "-m", "service", "roles"],
            env=roles_env(url, made),
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert again.returncode == 0, again.stderr
        assert "roles: 0 change(s)" in again.stdout
    finally:
        drop_database(database_url, name)
        drop_roles(database_url, made)


def test_migrate_works_on_a_sql_ascii_database(database_url: str) -> None:
    """The same server encoding for ``migrate``: SQLAlchemy's version parsing failed on bytes."""
    name = f"sqlascii_{uuid.uuid4().hex[:10]}"
    admin_execute(
        database_url,
        sql.SQL(
            "CREATE DATABASE {} ENCODING 'SQL_ASCII' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0"
        ).format(sql.Identifier(name)),
    )
    try:
        result = subprocess.run(
            [sys.executable, "-m", "service", "migrate"],
            env={"PATH": "/usr/bin:/bin", "DATABASE_URL": with_database(database_url, name)},
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr[-3000:]
    finally:
        drop_database(database_url, name)


# A TCP forwarder in a process of its own (the roles child blocks in connect, not in this loop).
FORWARD = """
import asyncio, sys

async def pipe(reader, writer):
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    finally:
        writer.close()

async def accept(reader, writer):
    up_reader, up_writer = await asyncio.open_connection(sys.argv[2], int(sys.argv[3]))
    await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer), return_exceptions=True)

async def main():
    server = await asyncio.start_server(accept, "127.0.0.1", int(sys.argv[1]))
    async with server:
        await server.serve_forever()

asyncio.run(main())
"""

"""The database roles (``service.db.roles``, ``python -m service roles``): each does its job and is
refused the rest; the grants map names every table, view and function; migrate keeps grants current.

Roles are cluster-wide: every test makes its own, under names no other test (or parallel run) uses,
and drops them at the end.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import psycopg
import pytest
from litestar.testing import AsyncTestClient
from psycopg.rows import dict_row

from harness.calls import expire, interrupt_body, start_body
from harness.database import DatabaseFactory, with_database
from harness.processes import Child
from harness.receiver import Receiver, new_secret
from service.app import create_app
from service.db import code, roles
from service.db.migrate import upgrade
from service.manifests import Registry, registry_of
from service.settings import Settings
from tests.conftest import AGENT, HOST, OPERATOR, ServiceProcess, make_settings
from tests.integration.test_history_retention import counts, finished_and_closed, pruned
from tests.integration.test_ops_api import add_attempt, add_outbox_row
from tests.support import ops_cli
from tests.support.outbox import outbox_rows, queue_results, relay_config, running_relay, wait_until

ROOT = Path(__file__).resolve().parents[2]
Db = psycopg.Connection[dict[str, Any]]

# The apps of the default settings: those the template's database code and grants are of.
REGISTRY = registry_of(Settings())


def as_role(url: str, role: str) -> str:
    """``url`` connecting as ``role`` (the test server trusts local connections: no password)."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=f"{role}@{parts.netloc.rsplit('@', 1)[-1]}"))


def drop_roles(database_url: str, names: roles.Names) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        every = [names.of(kind) for kind in roles.KINDS]
        present = roles.existing(conn, every)
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = ANY(%s)", (every,)
        )
        if names.owner in present:
            conn.execute(
                psycopg.sql.SQL("REASSIGN OWNED BY {} TO CURRENT_USER").format(
                    psycopg.sql.Identifier(names.owner)
                )
            )
        for name in every:
            if name in present:
                conn.execute(psycopg.sql.SQL("DROP OWNED BY {}").format(psycopg.sql.Identifier(name)))
                conn.execute(psycopg.sql.SQL("DROP ROLE {}").format(psycopg.sql.Identifier(name)))


def unique_names() -> roles.Names:
    suffix = uuid.uuid4().hex[:10]
    return roles.Names(*(f"t{suffix}_{kind}" for kind in roles.KINDS))


@pytest.fixture
def names(database_url: str) -> Iterator[roles.Names]:
    """Four roles of this test's own, made by ``roles.ensure`` on its database (as its admin)."""
    made = unique_names()
    try:
        with psycopg.connect(database_url) as conn:
            roles.ensure(conn, made, REGISTRY)
        yield made
    finally:
        drop_roles(database_url, made)


def connect(database_url: str, role: str) -> Db:
    return psycopg.connect(as_role(database_url, role), autocommit=True, row_factory=dict_row)


def refused(conn: Db, statement: str) -> str:
    """The error a statement gets; fails the test when it runs."""
    with pytest.raises(psycopg.errors.InsufficientPrivilege) as caught:
        conn.execute(statement)
    return str(caught.value)


# -- the grants map ---------------------------------------------------------------------------------


def test_the_grants_map_names_every_table_view_and_function(db: Db) -> None:
    assert roles.unclassified(db, REGISTRY) == []


def test_everything_the_grants_map_names_exists(db: Db) -> None:
    tables = {
        r["relname"]
        for r in db.execute(
            "SELECT relname FROM pg_class WHERE relkind IN ('r', 'p')"
            " AND relnamespace = 'public'::regnamespace"
        )
    }
    views = {r["viewname"] for r in db.execute("SELECT viewname FROM pg_views WHERE schemaname = 'public'")}
    functions = {d.name for d in code.definitions(code.SOURCE, REGISTRY.folders) if d.kind == "function"}
    assert set(roles.TABLES) - tables == set()
    assert set(roles.VIEWS) - views == set()
    assert set(roles.functions(REGISTRY)) - functions == set()


def test_a_table_the_grants_map_does_not_name_is_reported_and_granted_to_no_one(
    names: roles.Names, database_url: str, db: Db
) -> None:
    with connect(database_url, names.owner) as owner:
        owner.execute("CREATE TABLE added_later (id int)")
        owner.execute("CREATE FUNCTION added_later_fn() RETURNS int LANGUAGE sql RETURN 1")
    with psycopg.connect(as_role(database_url, names.owner)) as owner_tx:
        outcome = roles.grant(owner_tx, names, REGISTRY)
    assert outcome.unclassified == ["function added_later_fn", "table added_later"]
    with connect(database_url, names.runtime) as runtime:
        refused(runtime, "SELECT * FROM added_later")
        refused(runtime, "SELECT added_later_fn()")  # EXECUTE went from PUBLIC too


def test_roles_run_twice_changes_nothing_the_second_time(names: roles.Names, database_url: str) -> None:
    with psycopg.connect(database_url) as conn:
        assert roles.ensure(conn, names, REGISTRY).changes == []


def test_existing_mode_never_creates_a_role(database_url: str) -> None:
    made = unique_names()
    with psycopg.connect(database_url) as conn, pytest.raises(LookupError, match=made.owner):
        roles.ensure(conn, made, REGISTRY, create=False)
    with psycopg.connect(database_url) as conn:
        assert roles.existing(conn, [made.of(kind) for kind in roles.KINDS]) == set()


def test_existing_mode_grants_roles_an_admin_made(database_url: str, db: Db) -> None:
    made = unique_names()
    try:
        for kind in roles.KINDS:  # what a managed Postgres user runs first (docs/operations.md)
            db.execute(psycopg.sql.SQL("CREATE ROLE {} LOGIN").format(psycopg.sql.Identifier(made.of(kind))))
        with psycopg.connect(database_url) as conn:
            outcome = roles.ensure(conn, made, REGISTRY, create=False)
        assert not any(change.startswith(("created role", "updated role")) for change in outcome.changes)
        with connect(database_url, made.relay) as relay:
            relay.execute("SELECT count(*) FROM outbox")
            refused(relay, "SELECT * FROM host_sessions")
    finally:
        drop_roles(database_url, made)


def test_the_command_makes_the_roles_with_their_passwords(database_url: str) -> None:
    made = unique_names()
    env = {
        "PATH": "/usr/bin:/bin",
        "DATABASE_URL": database_url,
        **{f"DB_{kind.upper()}_ROLE": made.of(kind) for kind in roles.KINDS},
        "DB_RUNTIME_PASSWORD": "a-password-for-runtime-x9",
    }
    try:
        result = subprocess.run(
            [sys.executable, "-m", "service", "roles"],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 0, result.stderr
        assert f"created role {made.runtime}" in result.stdout
        with psycopg.connect(database_url) as conn:
            row = conn.execute(
                "SELECT rolpassword IS NOT NULL FROM pg_authid WHERE rolname = %s", (made.runtime,)
            ).fetchone()
            assert row == (True,)
        again = subprocess.run(
            [sys.executable, "-m", "service", "roles"],
            env={**env, "DB_RUNTIME_PASSWORD": ""},
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert again.returncode == 0, again.stderr
        assert "roles: 0 change(s)" in again.stdout
    finally:
        drop_roles(database_url, made)


def test_the_command_refuses_a_placeholder_password(database_url: str) -> None:
    env = {"PATH": "/usr/bin:/bin", "DATABASE_URL": database_url, "DB_RELAY_PASSWORD": "change-me-relay"}
    result = subprocess.run(
        [sys.executable, "-m", "service", "roles"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and "DB_RELAY_PASSWORD" in result.stderr


# -- DDL and functions ------------------------------------------------------------------------------


def test_only_the_owner_runs_ddl(names: roles.Names, database_url: str) -> None:
    for role in (names.runtime, names.relay, names.reader):
        with connect(database_url, role) as conn:
            refused(conn, "CREATE TABLE mine (id int)")
            assert "must be owner" in refused(conn, "DROP TABLE outbox")
            refused(conn, "ALTER TABLE outbox ADD COLUMN x int")
            refused(
                conn,
                "CREATE OR REPLACE FUNCTION rfc3339(moment timestamptz) RETURNS text LANGUAGE sql RETURN 'x'",
            )
    with connect(database_url, names.owner) as owner:
        owner.execute("CREATE TABLE owners_own (id int)")
        owner.execute("DROP TABLE owners_own")


def test_the_runtime_role_cannot_drop_truncate_or_run_programs(names: roles.Names, database_url: str) -> None:
    with connect(database_url, names.runtime) as runtime:
        refused(runtime, "DROP TABLE operations")
        refused(runtime, "TRUNCATE outbox")
        refused(runtime, "COPY outbox TO PROGRAM 'cat > /dev/null'")
        refused(runtime, "COPY (SELECT 1) TO PROGRAM 'id'")
        refused(runtime, "SELECT pg_read_file('/etc/passwd')")


# Settings a function's source declares besides the search_path (its own SET clause).
DECLARED_SETTINGS = {
    "claim_due": ["plan_cache_mode=force_generic_plan"],
    "settle_claimed": ["plan_cache_mode=force_generic_plan"],
}


def test_every_function_looked_up_when_it_runs_has_a_fixed_search_path(db: Db) -> None:
    rows = db.execute(
        "SELECT proname, proconfig, prosqlbody IS NOT NULL AS standard_body FROM pg_proc"
        " WHERE pronamespace = 'public'::regnamespace"
    ).fetchall()
    assert rows
    for row in rows:
        if row["standard_body"]:  # names resolved when created; a SET clause would stop inlining
            assert row["proconfig"] is None, row["proname"]
        else:
            declared = DECLARED_SETTINGS.get(row["proname"], [])
            assert row["proconfig"] == [*declared, f"search_path={code.SEARCH_PATH}"], row["proname"]


def test_a_temporary_table_of_the_caller_never_stands_in_for_ours(
    names: roles.Names, database_url: str
) -> None:
    with connect(database_url, names.runtime) as runtime:
        runtime.execute("CREATE TEMPORARY TABLE workspaces (conversation_id text)")
        runtime.execute("SELECT lock_workspace('conv-temp', true)")
        assert runtime.execute("SELECT count(*) AS n FROM pg_temp.workspaces").fetchone() == {"n": 0}
        assert runtime.execute(
            "SELECT count(*) AS n FROM public.workspaces WHERE conversation_id = 'conv-temp'"
        ).fetchone() == {"n": 1}


# -- migrate keeps the grants current ---------------------------------------------------------------


def test_migrate_as_the_owner_keeps_grants_and_a_replaced_function_keeps_its_search_path(
    names: roles.Names, database_url: str, db: Db
) -> None:
    db.execute("REVOKE SELECT ON outbox FROM " + names.reader)
    db.execute("GRANT TRUNCATE ON outbox TO " + names.relay)
    db.execute(
        "CREATE OR REPLACE FUNCTION settle_due(p_limit integer) RETURNS SETOF settled_operation"
        " LANGUAGE plpgsql AS $$ BEGIN RETURN; END $$"
    )  # no search_path now; re-made by migrate
    db.execute("DELETE FROM database_code WHERE name = 'settle_due'")
    outcome = upgrade(as_role(database_url, names.owner), REGISTRY, names)
    assert f"granted SELECT on table outbox to {names.reader}" in outcome.changes
    assert f"revoked TRUNCATE on table outbox from {names.relay}" in outcome.changes
    config = db.execute("SELECT proconfig FROM pg_proc WHERE proname = 'settle_due'").fetchone()
    assert config == {"proconfig": [f"search_path={code.SEARCH_PATH}"]}
    assert upgrade(as_role(database_url, names.owner), REGISTRY, names).changes == []


# -- each role does its job -------------------------------------------------------------------------


def _no_privilege_errors(log: Path) -> None:
    text = log.read_text(errors="replace")
    assert "permission denied" not in text and "InsufficientPrivilege" not in text, text[-3000:]


def test_the_runtime_role_serves_tool_calls_deadlines_interactions_and_ops_reads(
    names: roles.Names, database_url: str, db: Db, tmp_path: Path
) -> None:
    service = ServiceProcess(as_role(database_url, names.runtime), tmp_path, SWEEPER_POLL_SECONDS="0.1")
    Child.start(service)  # started, without the 20 s limit of its start(): a loaded machine is slow
    try:
        base = service.base_url
        service.wait_ready(120)  # /readyz 200: the runtime role reads the schema's revision and interfaces
        with httpx.Client(base_url=base, timeout=10) as http:
            started = http.post("/v1/tool-calls", json=start_body("conv-r1"), headers=AGENT)
            assert started.status_code == 202, started.text
            interrupted = http.post("/v1/tool-calls", json=interrupt_body("conv-r1"), headers=AGENT)
            assert interrupted.status_code == 200, interrupted.text
            assert interrupted.json()["status"] == "interrupted"
            due = http.post("/v1/tool-calls", json=start_body("conv-r2"), headers=AGENT).json()
            operation_id = due["operation"]["operation_id"]
            expire(db, operation_id)
            settled = "SELECT 1 FROM operations WHERE operation_id = %s AND state = 'completed'"
            wait_until(lambda: db.execute(settled, (operation_id,)).fetchone())  # by the sweeper
            ask = {
                "tool_call_id": "ask-r",
                "conversation_id": "conv-r3",
                "tool": "interact.ask",
                "arguments": {"prompt": "Another?", "choices": ["yes", "no"]},
            }
            assert http.post("/v1/tool-calls", json=ask, headers=AGENT).status_code == 202
            answered = http.post("/v1/host/interactions/ask-r/answer", json={"answer": "yes"}, headers=HOST)
            assert answered.status_code == 200, answered.text
            for path in ("/v1/ops/outbox", "/v1/ops/stats", "/v1/ops/overview", "/v1/ops/delivery"):
                assert http.get(path, headers=OPERATOR).status_code == 200, path
            paused = http.post("/v1/ops/delivery/pause", json={"reason": "roles test"}, headers=OPERATOR)
            assert paused.status_code == 200, paused.text
            assert http.post("/v1/ops/delivery/resume", headers=OPERATOR).status_code == 200
        assert len(outbox_rows(db)) == 3  # the interrupted, the completed and the answered call
        time.sleep(1.0)  # a few rounds of the sweeper and the other loops on the runtime role
    finally:
        service.stop()
    _no_privilege_errors(service.log)


def test_the_relay_role_delivers_and_cannot_read_sessions_messages_or_state(
    names: roles.Names, database_url: str, db: Db, capfd: pytest.CaptureFixture[str]
) -> None:
    secret = new_secret()
    queued = queue_results(db, "conv-relay", 2)
    relay_url = as_role(database_url, names.relay)
    with Receiver([secret]) as agent, running_relay(relay_config(relay_url, agent.url, [secret])):
        agent.wait_for_accepted({q.event_id for q in queued})
        wait_until(lambda: all(r["status"] == "delivered" for r in outbox_rows(db).values()))
    assert "permission denied" not in capfd.readouterr().err
    with connect(database_url, names.relay) as relay:
        for table in (
            "host_sessions",
            "console_sessions",
            "capabilities",
            "messages",
            "workspaces",
            "operations",
            "instance_states",
            "tool_calls",
            "interactions",
        ):
            refused(relay, f"SELECT * FROM {table}")
        refused(relay, "SELECT settle_due(10)")
        refused(relay, "SELECT lock_workspace('conv-relay', true)")
        refused(relay, "INSERT INTO outbox (event_id) VALUES (gen_random_uuid())")
        refused(relay, "TRUNCATE outbox")
        # Its retention deletes what it delivered, and it records tallies.
        relay.execute(
            "DELETE FROM outbox WHERE status = 'delivered' AND created_at < now() - interval '1 day'"
        )
        relay.execute("LISTEN lineup_outbox")


def test_the_reader_role_runs_ops_reads_and_writes_nothing(
    names: roles.Names,
    database_url: str,
    db: Db,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    dead = add_outbox_row(db, "conv-ops", 1, "dead", attempts=1, last_error="HTTP 500")
    add_attempt(db, dead, 1, "retry")
    ops: Callable[..., tuple[int, str, str]] = ops_cli.ops(
        as_role(database_url, names.reader), monkeypatch, capsys
    )
    code_, out, err = ops("outbox", "list")
    assert code_ == 0, err
    assert dead[:8] in out
    for args in (("outbox", "show", dead), ("stats",), ("operations", "list")):
        code_, out, err = ops(*args)
        assert code_ == 0, (args, err)
    code_, out, err = ops("outbox", "requeue", dead)
    assert code_ != 0 and "permission denied" in (out + err).lower()
    with connect(database_url, names.reader) as reader:
        reader.execute("SELECT * FROM outbox_overview")
        reader.execute("SELECT * FROM outbox_attempts")
        refused(reader, "UPDATE outbox SET attempts = 0")
        refused(reader, "DELETE FROM outbox_attempts")
        refused(reader, "INSERT INTO delivery_endpoints (endpoint) VALUES ('x')")
        for table in ("host_sessions", "console_sessions", "capabilities", "messages"):
            refused(reader, f"SELECT * FROM {table}")


def _managed_sql(names: roles.Names, database: str) -> list[str]:
    """The SQL docs/operations.md gives a managed-Postgres user, for these names and database."""
    text = (ROOT / "docs" / "operations.md").read_text()
    block = text[text.index("**Managed Postgres**") :]
    block = block[block.index("```sql") + len("```sql") : block.index("```", block.index("```sql") + 6)]
    for kind in roles.KINDS:
        block = block.replace(f"lineup_{kind}", names.of(kind))
    block = block.replace("DATABASE lineup", f"DATABASE {database}").replace("PASSWORD '…'", "")
    return [statement.strip() for statement in block.split(";") if statement.strip()]


def test_on_managed_postgres_the_documented_sql_then_existing_and_migrate_as_the_owner_suffice(
    database_factory: DatabaseFactory,
) -> None:
    name = database_factory.create_empty()
    url = with_database(database_factory.server, name)
    made = unique_names()
    try:
        with psycopg.connect(url, autocommit=True) as admin:
            for statement in _managed_sql(made, name):
                admin.execute(statement.encode())
        owner_url = as_role(url, made.owner)
        with psycopg.connect(owner_url) as owner:
            outcome = roles.ensure(owner, made, REGISTRY, create=False)
        assert outcome.warnings == []
        upgrade(owner_url, REGISTRY, made)
        with connect(url, made.runtime) as runtime:
            runtime.execute("SELECT lock_workspace('conv-managed', true)")
            refused(runtime, "TRUNCATE outbox")
        with connect(url, made.relay) as relay:
            relay.execute("SELECT count(*) FROM outbox_attempts")
            refused(relay, "SELECT * FROM host_sessions")
        with connect(url, made.reader) as reader:
            reader.execute("SELECT * FROM outbox_overview")
            refused(reader, "UPDATE outbox SET attempts = 0")
    finally:
        drop_roles(url, made)
        database_factory.drop(name)


def test_a_role_name_that_is_a_superuser_is_refused_never_demoted(database_url: str, db: Db) -> None:
    made = unique_names()
    db.execute(psycopg.sql.SQL("CREATE ROLE {} SUPERUSER").format(psycopg.sql.Identifier(made.runtime)))
    try:
        with psycopg.connect(database_url) as conn, pytest.raises(ValueError, match="is a superuser"):
            roles.ensure(conn, made, REGISTRY)
        row = db.execute("SELECT rolsuper FROM pg_roles WHERE rolname = %s", (made.runtime,)).fetchone()
        assert row == {"rolsuper": True}
    finally:
        drop_roles(database_url, made)


async def test_the_runtime_role_writes_within_its_limits_and_prunes_history(
    names: roles.Names, database_url: str, db: Db, registry: Registry
) -> None:
    # In the service's own process: Host writes spend their allowance, history retention deletes
    # what it may, each on the runtime role's grants alone.
    runtime = as_role(database_url, names.runtime)
    app = create_app(make_settings(runtime), registry, sweeper=False)
    async with AsyncTestClient(app=app) as client:
        await finished_and_closed(client, db, "conv-pruned")
    spent = db.execute("SELECT count(*) AS n FROM write_allowances").fetchone()
    assert spent is not None and spent["n"] > 0
    done = await pruned(runtime)
    assert done is not None and done["operations"] == 1 and done["instances"] == 1
    assert not any(counts(db, "conv-pruned").values())


def test_a_function_of_the_database_code_on_its_way_out_keeps_its_grants_until_it_is_dropped(
    names: roles.Names, database_url: str, tmp_path: Path
) -> None:
    # migrate grants before it drops what the files no longer hold (service.db.code.apply): a call
    # of the release before, running a body that names such a function, keeps its EXECUTE.
    source = tmp_path / "sql"
    shutil.copytree(code.SOURCE, source)
    (source / "98_leaving.sql").write_text(
        "-- leaving_fn: a function the next source no longer holds\n"
        "CREATE OR REPLACE FUNCTION leaving_fn() RETURNS integer LANGUAGE sql AS $$ SELECT 1 $$;\n"
    )
    with psycopg.connect(database_url) as conn:
        code.apply(conn, REGISTRY.folders, source)
        conn.execute(f'GRANT EXECUTE ON FUNCTION leaving_fn() TO "{names.runtime}"')
        conn.execute("REVOKE EXECUTE ON FUNCTION leaving_fn() FROM PUBLIC")
    with psycopg.connect(database_url) as conn:
        assert code.leaving(conn, REGISTRY.folders) == {"leaving_fn"}
        outcome = roles.grant(conn, names, REGISTRY)
    assert outcome.unclassified == []
    assert not [change for change in outcome.changes if "leaving_fn" in change]
    with connect(database_url, names.runtime) as runtime:
        assert runtime.execute("SELECT leaving_fn() AS one").fetchone() == {"one": 1}
    with psycopg.connect(database_url) as conn:
        assert code.drop_unwanted(conn, REGISTRY.folders) == ["dropped function leaving_fn"]
        assert code.leaving(conn, REGISTRY.folders) == set()

"""The database roles and what each may do: the one grants map, and the idempotent step that makes
the database agree with it.

Four roles (names configurable, ``service.settings``; roles are cluster-wide):

- **owner** — owns the schema's tables, views, functions and types; ``migrate`` runs as it, and it
  is the only role that can run DDL.
- **runtime** — ``serve``: the DML of the tables it writes (never ``TRUNCATE``, ``REFERENCES`` or
  ``TRIGGER``) and ``EXECUTE`` on the functions it calls.
- **relay** — ``python -m relay``: the outbox, its attempts and the delivery tables; nothing of
  sessions, messages or state.
- **reader** — operators' read-only access: the outbox, its attempts, operations, tool calls and the
  ops views; it writes nothing.

:func:`grant` converges the privileges of the roles that exist on every table, view, sequence and
function of the ``public`` schema to :data:`TABLES`, :data:`VIEWS` and :func:`functions` (what is
granted and not in the map is revoked; ``EXECUTE`` is revoked from ``PUBLIC``). ``migrate`` runs it
at the end of an upgrade to head, in the migration's transaction, so a table or function a release
adds is granted in the same commit that creates it. An object the map does not name gets nothing
(a test fails on it: classify it here). :func:`ensure` — ``python -m service roles``, run as an
administrator — also creates or updates the roles, hands existing objects to the owner, and grants
the database and the schema. :func:`limit` (run by :func:`ensure`) gives each role its limits
(:data:`DEFAULT_LIMITS`, ``DB_ROLE_LIMITS``): a ``CONNECTION LIMIT`` and, in this database,
``statement_timeout``, ``idle_in_transaction_session_timeout`` and ``temp_file_limit``; and
:func:`database_access` keeps ``CONNECT`` and ``TEMPORARY`` on the database for the four roles
alone (not ``PUBLIC``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import sql
from psycopg.rows import tuple_row

from service.db import code
from service.db.role_limits import DEFAULT_LIMITS as DEFAULT_LIMITS
from service.db.role_limits import Limits as Limits
from service.db.role_limits import parse_limits as parse_limits

if TYPE_CHECKING:
    from service.manifests import Registry

Connection = psycopg.Connection[Any]

OWNER, RUNTIME, RELAY, READER = "owner", "runtime", "relay", "reader"
KINDS = (OWNER, RUNTIME, RELAY, READER)
#: The roles the grants map gives privileges to (the owner has them all by owning).
GRANTEES = (RUNTIME, RELAY, READER)
LOCK_TIMEOUT = "5s"
DEFAULT_NAMES: dict[str, str] = {kind: f"lineup_{kind}" for kind in KINDS}

R = ("SELECT",)
RU = ("SELECT", "UPDATE")
RIU = ("SELECT", "INSERT", "UPDATE")
RIUD = ("SELECT", "INSERT", "UPDATE", "DELETE")

# The grants map: every table of the public schema, and what each role may do with it.
TABLES: dict[str, dict[str, tuple[str, ...]]] = {
    # Which release the schema serves: every process checks it at start (/readyz).
    "alembic_version": {RUNTIME: R, RELAY: R, READER: R},
    "database_code": {RUNTIME: R, READER: R},
    # What each Tool declares of its operations (migrate writes it; the decisions read it).
    "app_tools": {RUNTIME: R, READER: R},
    # Sessions and credentials: the service only.
    "host_sessions": {RUNTIME: RIUD},
    "capabilities": {RUNTIME: RIUD},
    "console_sessions": {RUNTIME: RIUD},
    # Conversations and their state.
    "workspaces": {RUNTIME: RIUD},
    "app_instances": {RUNTIME: RIUD},
    "sub_sessions": {RUNTIME: RIUD},
    "instance_states": {RUNTIME: RIUD},
    "operations": {RUNTIME: RIUD, READER: R},
    "tool_calls": {RUNTIME: RIUD, READER: R},
    "surface_events": {RUNTIME: RIUD},
    "messages": {RUNTIME: RIUD},
    "interactions": {RUNTIME: RIUD},
    "interaction_tasks": {RUNTIME: RIUD},
    "projection_events": {RUNTIME: RIUD},
    # Writes a person's session or a conversation may still make in this window (service.db.limits).
    "write_allowances": {RUNTIME: RIUD},
    # History retention's last round (the service prunes; operators read what it kept).
    "history_retention": {RUNTIME: RIU, READER: R},
    # Delivery: the service queues rows and controls delivery (requeue, pause); the relay claims,
    # delivers, records attempts and prunes.
    # History retention (in the service) removes the delivered rows of the operations it prunes.
    "outbox": {RUNTIME: RIUD, RELAY: ("SELECT", "UPDATE", "DELETE"), READER: R},
    "outbox_attempts": {RUNTIME: R, RELAY: ("SELECT", "INSERT", "DELETE"), READER: R},
    "delivery_endpoints": {RUNTIME: RIU, RELAY: RIU, READER: R},
    "outbox_tallies": {RUNTIME: R, RELAY: RIU, READER: R},
    "outbox_retention": {RUNTIME: R, RELAY: RIU, READER: R},
}

# Every view, and the roles that may read it.
VIEWS: dict[str, tuple[str, ...]] = {
    "outbox_overview": (RUNTIME, RELAY, READER),
    "history_oldest": (RUNTIME, READER),
}

_PURE = (RUNTIME, RELAY, READER)  # no table behind them: formats and constants
# Every function of service/db/sql/, and the roles that may EXECUTE it. A trigger's function gets no
# one: a trigger runs it whatever the privileges of the role whose statement fired it. A MiniApp's
# functions (the SQL of the registry's app folders) are the service's decisions: the runtime role's,
# unless named here.
ENGINE_FUNCTIONS: dict[str, tuple[str, ...]] = {
    "rfc3339": _PURE,
    "uuid_v7": (RUNTIME,),
    "late_interrupt_status": _PURE,
    "interaction_result": _PURE,
    "database_interfaces": _PURE,
    "status_code": (RUNTIME, READER),  # tool_calls.status_code as release 0.4.0 reads it
    "operations_guard": (),
    "workspaces_guard": (),
    "operation_json": _PURE,
    "operation_failure_holds": _PURE,
    "deadline_state": _PURE,
    "instance_states_readonly_is_final": (),
    "messages_sub_session_open": (),
    "project_message": (),
    "project_interaction": (),
    "project": (RUNTIME,),
    "lock_workspace": (RUNTIME,),
    "open_instance": (RUNTIME,),
    "close_instances_v2": (RUNTIME,),
    "queue_outbox": (RUNTIME,),
    # The trace context of what produces rows in a transaction (60_outbox.sql).
    "trace_producer": (RUNTIME,),
    "producer_traceparent": (RUNTIME,),
    "producer_tracestate": (RUNTIME,),
    "settle_focusing_v2": (RUNTIME,),
    "claim_due": (RUNTIME,),
    "settle_claimed": (RUNTIME,),
    "settle_due": (RUNTIME,),
    "settle_due_in": (RUNTIME,),
    "settle_due_in_traced": (RUNTIME,),
    "settle_if_overdue": (RUNTIME,),
    # The Runtime's API for MiniApps' decisions (75_app_api.sql): run by the decisions, as the runtime role.
    "acting_app": (RUNTIME,),
    "refuse_other_app": (RUNTIME,),
    "app_open_instance": (RUNTIME,),
    "app_close_instance": (RUNTIME,),
    "app_hand_over": (RUNTIME,),
    "app_hand_back": (RUNTIME,),
    "app_open_operation": (RUNTIME,),
    "app_settle_operation": (RUNTIME,),
    "app_fail_at_deadline": (RUNTIME,),
    "app_fail_operation": (RUNTIME,),
    "app_queue_result": (RUNTIME,),
    # An app's own forms (75_app_api.sql): asked by its decision, answered once by the person.
    "app_ask": (RUNTIME,),
    "answer_app_form": (RUNTIME,),
    "question_json": _PURE,
    "question_result": _PURE,
    "call_tool_v3": (RUNTIME,),
    "spend_write": (RUNTIME,),
    "limited_decide": (RUNTIME,),  # a Tool's decision behind a write allowance (persons' calls)
    "uuid_v7_floor": (RUNTIME,),
    "expire_tool_call_answers": (RUNTIME,),
    "prune_operations": (RUNTIME,),
    "prune_instances": (RUNTIME,),
    "prune_messages": (RUNTIME,),
    "prune_surface_events": (RUNTIME,),
    "prune_interactions": (RUNTIME,),
    "prune_conversation": (RUNTIME,),
    # The relay on Citus: its claims, outcomes, circuit and pruning on the shards of its node.
    "is_citus_table": (RELAY,),
    "local_shards": (RELAY,),
    "shards_of": (RELAY,),
    "relay_claim_local": (RELAY,),
    "relay_record_local": (RELAY,),
    "relay_prune_local": (RELAY,),
    "relay_open_circuit": (RELAY,),
    "relay_look_local": (RELAY,),
    "relay_take_probe_local": (RELAY,),
    "relay_close_local": (RELAY,),
}


def functions(registry: Registry) -> dict[str, tuple[str, ...]]:
    """Every function of the database code of ``registry``'s apps and of the engine, and the roles
    that may EXECUTE it."""
    return {
        **{
            d.name: (RUNTIME,)
            for folder in registry.folders
            for d in code.definitions(folder, ())
            if d.kind == "function"
        },
        **ENGINE_FUNCTIONS,
    }


# What the public schema holds: tables ('r', 'p'), views ('v'), sequences ('S') with the table that
# owns them, and functions with their identity, each with its ACL (the default one when never set).
_OBJECTS = """
SELECT CASE c.relkind WHEN 'v' THEN 'view' WHEN 'S' THEN 'sequence' ELSE 'table' END AS kind,
       c.relname AS name, format('%%I', c.relname) AS identity,
       coalesce(owner_table.relname, '') AS table_name,
       coalesce(c.relacl,
                acldefault(CASE c.relkind WHEN 'S' THEN 's' ELSE 'r' END::"char", c.relowner)) AS acl
FROM pg_class c
LEFT JOIN pg_depend d ON c.relkind = 'S' AND d.classid = 'pg_class'::regclass AND d.objid = c.oid
                     AND d.refclassid = 'pg_class'::regclass AND d.deptype IN ('a', 'i')
LEFT JOIN pg_class owner_table ON owner_table.oid = d.refobjid
WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'S')
  AND NOT EXISTS (SELECT 1 FROM pg_depend e WHERE e.classid = 'pg_class'::regclass AND e.objid = c.oid
                                             AND e.deptype = 'e')
UNION ALL
SELECT 'function', p.proname, p.oid::regprocedure::text, '',
       coalesce(p.proacl, acldefault('f'::"char", p.proowner))
FROM pg_proc p
WHERE p.pronamespace = 'public'::regnamespace
  AND NOT EXISTS (SELECT 1 FROM pg_depend e WHERE e.classid = 'pg_proc'::regclass AND e.objid = p.oid
                                             AND e.deptype = 'e')
"""

_PRIVILEGES = (
    "WITH objects AS ("
    + _OBJECTS
    + """)
SELECT o.kind, o.identity, CASE a.grantee WHEN 0 THEN 'PUBLIC' ELSE r.rolname END AS grantee,
       a.privilege_type
FROM objects o CROSS JOIN LATERAL aclexplode(o.acl) a
LEFT JOIN pg_roles r ON r.oid = a.grantee
WHERE a.grantee = 0 OR r.rolname = ANY(%(roles)s)
"""
)


@dataclass(frozen=True, slots=True)
class Names:
    """The four roles' names."""

    owner: str = DEFAULT_NAMES[OWNER]
    runtime: str = DEFAULT_NAMES[RUNTIME]
    relay: str = DEFAULT_NAMES[RELAY]
    reader: str = DEFAULT_NAMES[READER]

    def of(self, kind: str) -> str:
        return str(getattr(self, kind))

    def grantees(self) -> dict[str, str]:
        return {kind: self.of(kind) for kind in GRANTEES}


_ROLE_SETTINGS = """
SELECT r.rolname, r.rolconnlimit, coalesce(s.setconfig, '{}') AS setconfig
FROM pg_roles r
LEFT JOIN pg_db_role_setting s
  ON s.setrole = r.oid AND s.setdatabase = (SELECT oid FROM pg_database WHERE datname = current_database())
WHERE r.rolname = ANY(%s)
"""


def limit(conn: Connection, names: Names, limits: Mapping[str, Limits], outcome: Outcome) -> None:
    """Give each role that exists its limits: ``ALTER ROLE … CONNECTION LIMIT`` and ``ALTER ROLE …
    IN DATABASE <this one> SET`` each setting, only where they differ (a second run changes
    nothing). Each statement commits on its own; one the administrator may not run (only a
    superuser sets ``temp_file_limit``, only a role with CREATEROLE alters roles) becomes a warning
    naming it."""
    wanted = {names.of(kind): limits[kind] for kind in KINDS}
    rows = _q(conn).execute(_ROLE_SETTINGS, (sorted(wanted),)).fetchall()
    database = sql.Identifier(_database(conn))
    conn.commit()
    for name, connection_limit, config in rows:
        role, want = sql.Identifier(name), wanted[name]
        if connection_limit != want.connection_limit:
            statement = sql.SQL("ALTER ROLE {} CONNECTION LIMIT {}").format(
                role, sql.Literal(want.connection_limit)
            )
            _attempt(conn, outcome, statement, f"connection limit of {name} now {want.connection_limit}")
        held = dict(item.split("=", 1) for item in config)
        for setting, value in want.settings().items():
            if held.get(setting) == value:
                continue
            statement = sql.SQL("ALTER ROLE {} IN DATABASE {} SET {} = {}").format(
                role, database, sql.Identifier(setting), sql.Literal(value)
            )
            _attempt(conn, outcome, statement, f"{setting} of {name} now {value}")
        conn.commit()


def database_access(names: Names, admin: str | None) -> list[tuple[str, str, str, bool]]:
    """(on, grantee, privilege, wanted) for the database itself: ``CONNECT`` and ``TEMPORARY`` for
    the four roles and not for ``PUBLIC`` (every role of the cluster, until revoked), and ``CONNECT``
    for the administrator running this when it is no superuser (so it keeps reaching the database)."""
    wanted = [
        (DATABASE, names.of(kind), privilege, True)
        for kind in KINDS
        for privilege in ("CONNECT", "TEMPORARY")
    ]
    if admin is not None:
        wanted.append((DATABASE, admin, "CONNECT", True))
    wanted += [(DATABASE, "PUBLIC", "CONNECT", False), (DATABASE, "PUBLIC", "TEMPORARY", False)]
    return wanted


@dataclass(slots=True)
class Outcome:
    """What a run changed, and what the database holds that the grants map does not name."""

    changes: list[str] = field(default_factory=list)
    unclassified: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _q(conn: Connection) -> psycopg.Cursor[tuple[Any, ...]]:
    """A cursor with plain tuples, whatever the connection's row factory."""
    return conn.cursor(row_factory=tuple_row)


def existing(conn: Connection, names: Iterable[str]) -> set[str]:
    wanted = list(names)
    rows = _q(conn).execute("SELECT rolname FROM pg_roles WHERE rolname = ANY(%s)", (wanted,)).fetchall()
    return {row[0] for row in rows}


def _objects(conn: Connection) -> list[tuple[str, str, str, str]]:
    rows = _q(conn).execute(_OBJECTS.replace("%%", "%")).fetchall()
    return [(row[0], row[1], row[2], row[3]) for row in rows]


def _leaving(conn: Connection, registry: Registry) -> set[str]:
    """The database code's functions on their way out (``service.db.code.leaving``): a call of the
    release before may still run a body that names one, so their privileges stay as they are until
    ``migrate`` drops them."""
    return code.leaving(conn, registry.folders)


def unclassified(conn: Connection, registry: Registry) -> list[str]:
    """Tables, views and functions of the public schema that the grants map does not name (a
    function of the database code on its way out, ``service.db.code.leaving``, is not one)."""
    missing = []
    known: dict[str, set[str]] = {
        "table": set(TABLES),
        "view": set(VIEWS),
        "function": set(functions(registry)) | _leaving(conn, registry),
    }
    for kind, name, _identity, _table in _objects(conn):
        if kind in known and name not in known[kind]:
            missing.append(f"{kind} {name}")
    return sorted(set(missing))


def _wanted(
    conn: Connection, names: Names, present_roles: set[str], registry: Registry
) -> set[tuple[str, str, str, str]]:
    """(kind, identity, grantee, privilege) the map asks for, for the roles that exist."""
    wanted: set[tuple[str, str, str, str]] = set()
    executable = functions(registry)
    role = names.grantees()
    inserting: dict[str, set[str]] = {}
    for table, by_role in TABLES.items():
        for kind, privileges in by_role.items():
            if "INSERT" in privileges:
                inserting.setdefault(table, set()).add(kind)
    for kind, name, identity, table in _objects(conn):
        grants: Mapping[str, Iterable[str]] = {}
        if kind == "table":
            grants = TABLES.get(name, {})
        elif kind == "view":
            grants = {k: ("SELECT",) for k in VIEWS.get(name, ())}
        elif kind == "function":
            grants = {k: ("EXECUTE",) for k in executable.get(name, ())}
        elif kind == "sequence":  # an identity column's: whoever inserts into its table uses it
            grants = {k: ("USAGE",) for k in inserting.get(table, ())}
        for grantee_kind, allowed in grants.items():
            if role[grantee_kind] in present_roles:
                wanted.update((kind, identity, role[grantee_kind], p) for p in allowed)
    return wanted


def grant(conn: Connection, names: Names, registry: Registry) -> Outcome:
    """Make the privileges of the roles that exist (and of PUBLIC) on the public schema's objects
    what the grants map says (with the functions of ``registry``'s apps), in the caller's
    transaction; the caller owns the objects (``migrate``) or is a superuser. Only differences are
    granted or revoked: a second run changes nothing."""
    outcome = Outcome(unclassified=unclassified(conn, registry))
    grantees = names.grantees()
    present_roles = existing(conn, grantees.values())
    if not present_roles:
        return outcome
    leaving = _leaving(conn, registry)
    wanted = _wanted(conn, names, present_roles, registry)
    rows = _q(conn).execute(_PRIVILEGES, {"roles": sorted(present_roles)}).fetchall()
    present = {
        (row[0], row[1], row[2], row[3])
        for row in rows
        if not (row[0] == "function" and row[1].split("(", 1)[0] in leaving)
    }
    for kind, identity, grantee, privilege in sorted(present - wanted):
        on = "FUNCTION " if kind == "function" else ("SEQUENCE " if kind == "sequence" else "")
        target = sql.SQL("PUBLIC") if grantee == "PUBLIC" else sql.Identifier(grantee)
        conn.execute(
            sql.SQL("REVOKE {} ON {}{} FROM {}").format(
                sql.SQL(privilege), sql.SQL(on), sql.SQL(identity), target
            )
        )
        outcome.changes.append(f"revoked {privilege} on {kind} {identity} from {grantee}")
    for kind, identity, grantee, privilege in sorted(wanted - present):
        on = "FUNCTION " if kind == "function" else ("SEQUENCE " if kind == "sequence" else "")
        conn.execute(
            sql.SQL("GRANT {} ON {}{} TO {}").format(
                sql.SQL(privilege), sql.SQL(on), sql.SQL(identity), sql.Identifier(grantee)
            )
        )
        outcome.changes.append(f"granted {privilege} on {kind} {identity} to {grantee}")
    return outcome


_NOT_OWNED = """
SELECT CASE c.relkind WHEN 'v' THEN 'VIEW' WHEN 'S' THEN 'SEQUENCE' ELSE 'TABLE' END,
       format('%%I', c.relname)
FROM pg_class c
WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p', 'v')
  AND c.relowner <> %(owner)s::regrole
  AND NOT EXISTS (SELECT 1 FROM pg_depend e WHERE e.classid = 'pg_class'::regclass AND e.objid = c.oid
                                             AND e.deptype = 'e')
UNION ALL
SELECT 'FUNCTION', p.oid::regprocedure::text
FROM pg_proc p
WHERE p.pronamespace = 'public'::regnamespace AND p.proowner <> %(owner)s::regrole
  AND NOT EXISTS (SELECT 1 FROM pg_depend e WHERE e.classid = 'pg_proc'::regclass AND e.objid = p.oid
                                             AND e.deptype = 'e')
UNION ALL
SELECT 'TYPE', format('%%I', t.typname)
FROM pg_type t JOIN pg_class c ON c.oid = t.typrelid
WHERE t.typnamespace = 'public'::regnamespace AND c.relkind = 'c' AND t.typowner <> %(owner)s::regrole
"""


DATABASE, SCHEMA = "the database", "schema public"

_HOLDS = {
    DATABASE: "SELECT EXISTS (SELECT 1 FROM pg_database o,"
    " aclexplode(coalesce(o.datacl, acldefault('d'::\"char\", o.datdba))) a"
    " WHERE o.datname = current_database() AND a.grantee = %s AND a.privilege_type = %s)",
    SCHEMA: "SELECT EXISTS (SELECT 1 FROM pg_namespace o,"
    " aclexplode(coalesce(o.nspacl, acldefault('n'::\"char\", o.nspowner))) a"
    " WHERE o.nspname = 'public' AND a.grantee = %s AND a.privilege_type = %s)",
}


def _holds(conn: Connection, on: str, grantee: str, privilege: str) -> bool:
    """Whether ``grantee`` (a role, or PUBLIC) holds ``privilege`` on the database or the schema
    by a grant of its own."""
    oid = 0
    if grantee != "PUBLIC":
        row = _q(conn).execute("SELECT %s::regrole::oid", (grantee,)).fetchone()
        oid = row[0] if row else 0
    held = _q(conn).execute(_HOLDS[on], (oid, privilege)).fetchone()
    return bool(held and held[0])


def _plain(conn: Connection, name: str) -> bool:
    """Whether a role may log in and nothing more: no superuser, roles, databases or replication."""
    row = conn.execute(
        "SELECT rolcanlogin AND NOT (rolsuper OR rolcreatedb OR rolcreaterole OR rolreplication)"
        " FROM pg_roles WHERE rolname = %s",
        (name,),
    ).fetchone()
    return bool(row and row[0])


def _unprivileged(conn: Connection) -> str | None:
    """The role running this when it is no superuser (None for a superuser)."""
    row = (
        _q(conn)
        .execute("SELECT current_user, rolsuper FROM pg_roles WHERE rolname = current_user")
        .fetchone()
    )
    return None if row is None or row[1] else str(row[0])


def _database(conn: Connection) -> str:
    row = _q(conn).execute("SELECT current_database()").fetchone()
    assert row is not None
    return str(row[0])


def _attempt(conn: Connection, outcome: Outcome, statement: sql.SQL | sql.Composed, done: str) -> bool:
    """Run one statement the administrator may lack the right for; a refusal becomes a warning
    naming the statement, for someone who has the right to run."""
    try:
        with conn.transaction():
            conn.execute(statement)
    except psycopg.errors.InsufficientPrivilege as exc:
        outcome.warnings.append(
            f"{statement.as_string(conn)}: {exc.diag.message_primary} (run it as an admin)"
        )
        return False
    outcome.changes.append(done)
    return True


def ensure(
    conn: Connection,
    names: Names,
    registry: Registry,
    passwords: Mapping[str, str | None] | None = None,
    *,
    create: bool = True,
    limits: Mapping[str, Limits] | None = None,
) -> Outcome:
    """``python -m service roles``: create (``create``) or update the four roles — each may log in,
    none is a superuser or may create roles or databases; a password only when given — grant the
    database and the schema, hand every object of the public schema to the owner, then
    :func:`grant`. Commits as it goes (``conn`` must not be in a transaction of the caller's): the
    roles and the schema's grants, then each object handed over, then the grants; a run stopped
    half-way (a lock not given within ``LOCK_TIMEOUT``) is completed by running it again.
    With ``create=False`` (managed Postgres, where the platform's admin made the roles) the roles
    must exist and are left as they are."""
    passwords = passwords or {}
    outcome = Outcome()
    me = _q(conn).execute("SELECT current_user").fetchone()
    if create and me is not None and me[0] in {names.of(kind) for kind in KINDS}:
        raise ValueError(f"connected as {me[0]}, one of the roles to make: run this as another (admin) role")
    present = existing(conn, (names.of(kind) for kind in KINDS))
    missing = [names.of(kind) for kind in KINDS if names.of(kind) not in present]
    if missing and not create:
        raise LookupError(
            f"role(s) {', '.join(missing)} do not exist: create them (docs/operations.md, "
            '"Database roles") or run without --existing'
        )
    superusers = {
        row[0]
        for row in _q(conn)
        .execute("SELECT rolname FROM pg_roles WHERE rolsuper AND rolname = ANY(%s)", (sorted(present),))
        .fetchall()
    }
    if superusers:  # never demoted by a setting that names one: each role is a role of its own
        raise ValueError(
            f"{', '.join(sorted(superusers))} is a superuser: give the roles names of their own"
            " (DB_OWNER_ROLE, DB_RUNTIME_ROLE, DB_RELAY_ROLE, DB_READER_ROLE)"
        )
    for kind in KINDS if create else ():
        name = names.of(kind)
        password = passwords.get(kind)
        if name in present and _plain(conn, name) and not password:
            continue
        verb = "ALTER" if name in present else "CREATE"
        statement = sql.SQL("{} ROLE {} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION").format(
            sql.SQL(verb), sql.Identifier(name)
        )
        if password:
            statement = sql.SQL("{} PASSWORD {}").format(statement, sql.Literal(password))
        conn.execute(statement)
        outcome.changes.append(f"{'updated' if name in present else 'created'} role {name}")
    owner = names.owner
    # (on, grantee, privilege, wanted): the database and the schema. Only the owner creates in the
    # schema (PUBLIC could before Postgres 15), so no other role can run DDL.
    wanted = database_access(names, _unprivileged(conn))
    wanted += [
        (SCHEMA, "PUBLIC", "CREATE", False),
        (SCHEMA, owner, "USAGE", True),
        (SCHEMA, owner, "CREATE", True),
    ]
    for kind in GRANTEES:
        wanted += [(SCHEMA, names.of(kind), "USAGE", True), (SCHEMA, names.of(kind), "CREATE", False)]
    for on, grantee, privilege, grant_it in wanted:
        if _holds(conn, on, grantee, privilege) == grant_it:
            continue
        target = sql.SQL("PUBLIC") if grantee == "PUBLIC" else sql.Identifier(grantee)
        where = (
            sql.SQL("DATABASE {}").format(sql.Identifier(_database(conn)))
            if on == DATABASE
            else sql.SQL("SCHEMA public")
        )
        statement = sql.SQL("GRANT {} ON {} TO {}" if grant_it else "REVOKE {} ON {} FROM {}").format(
            sql.SQL(privilege), where, target
        )
        verb, to = ("granted", "to") if grant_it else ("revoked", "from")
        done = f"{verb} {privilege} on {on} {to} {grantee}"
        if _attempt(conn, outcome, statement, done) and _holds(conn, on, grantee, privilege) != grant_it:
            # Not the object's owner: Postgres warns and changes nothing.
            outcome.changes.remove(done)
            outcome.warnings.append(f"{statement.as_string(conn)}: not in effect (run it as an admin)")
    conn.commit()
    limit(conn, names, DEFAULT_LIMITS if limits is None else limits, outcome)
    # Objects an earlier migrate made as another role (a superuser, before these roles) go to the
    # owner, so that its migrate can alter them. Handing a table over locks it (ACCESS EXCLUSIVE)
    # until commit, while the previous release may be serving: each object goes in a transaction of
    # its own, so this never holds one lock while waiting for another (a deadlock with a request
    # that holds that one and waits for this), and waits a little at most (and fails, to be run
    # again) rather than queue every query behind a long transaction.
    for kind, identity in _q(conn).execute(_NOT_OWNED, {"owner": owner}).fetchall():
        conn.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
        _attempt(
            conn,
            outcome,
            sql.SQL("ALTER {} {} OWNER TO {}").format(
                sql.SQL(kind), sql.SQL(identity), sql.Identifier(owner)
            ),
            f"{kind.lower()} {identity} now owned by {owner}",
        )
        conn.commit()
    granted = grant(conn, names, registry)  # GRANT and REVOKE lock no table
    outcome.changes.extend(granted.changes)
    outcome.unclassified = granted.unclassified
    return outcome

"""The database code — every SQL function, trigger, type and view the service relies on — from its one
source, the ``.sql`` files in ``service/db/sql/`` (read ``service/db/sql/README.md`` first).

The apps' decision functions (``service/apps/<app>/*.sql``) are applied after them, from the app
folders of the registry ``migrate`` runs with (``service.manifests.Registry.folders``): the same
folders ``serve`` runs, so a function is never applied for an app the service does not run.

``migrate`` runs the table migrations, then :func:`apply` brings the database code in line with the
files, in the same transaction: what changed is created or replaced, what is no longer in the files
is dropped, and each definition's checksum is kept in ``database_code``, so an unchanged definition
is never touched (replacing a trigger takes a lock on its table). The files are applied in name
order and each statement in file order; function bodies are checked when they run, not when they
are created (as ``pg_dump`` restores them), so the order matters only for types and triggers.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import psycopg
from psycopg.rows import tuple_row

SOURCE = Path(__file__).with_name("sql")

# The generation of the database code this release calls: the schema serves it when it is among
# ``database_interfaces()`` (service/db/sql/99_compat.sql). Bump it with any change to the name,
# arguments or result of a function the service or the relay calls (see the README).
INTERFACE = 4

Kind = Literal["type", "function", "trigger", "view"]

_HEADER = re.compile(
    r"^CREATE\s+(?:OR\s+REPLACE\s+)?(?P<kind>FUNCTION|TRIGGER|VIEW|TYPE)\s+(?P<name>\w+)"
    r"(?:.*?\bON\s+(?P<table>\w+))?",
    re.IGNORECASE | re.DOTALL,
)
_DOLLAR_QUOTE = re.compile(r"\$(?:[A-Za-z_]\w*)?\$")


Connection = psycopg.Connection[Any]


@dataclass(frozen=True, slots=True)
class Definition:
    kind: Kind
    name: str  # a trigger's is "table.trigger"
    sql: str
    source: str  # the file it comes from

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()

    @property
    def key(self) -> tuple[str, str]:
        return (self.kind, self.name)


def statements(text: str) -> Iterator[str]:
    """The statements of a SQL file: split at a ``;`` ending a line outside dollar quotes; comments
    before a statement stay with it."""
    current: list[str] = []
    quote: str | None = None
    for line in text.splitlines():
        current.append(line)
        for match in _DOLLAR_QUOTE.finditer(line.split("--", 1)[0] if quote is None else line):
            if quote is None:
                quote = match.group()
            elif match.group() == quote:
                quote = None
        if quote is None and line.rstrip().endswith(";") and not line.lstrip().startswith("--"):
            statement = "\n".join(current).strip()
            current = []
            if _code(statement):
                yield statement
    if _code("\n".join(current)):
        raise ValueError(f"a statement without its closing semicolon: {' '.join(current)[:80]!r}")


def _code(statement: str) -> str:
    return "\n".join(
        line for line in statement.splitlines() if line.strip() and not line.lstrip().startswith("--")
    )


def definitions(source: Path, apps: Sequence[Path]) -> list[Definition]:
    """Every definition of the files, in the order they are applied: ``source``'s, then each app
    folder's of ``apps`` (folder by folder, in their order; ``Registry.folders``)."""
    found: list[Definition] = []
    paths = sorted(source.glob("*.sql"))
    for folder in apps:
        paths += sorted(folder.glob("*.sql"))
    for path in paths:
        name_of_file = path.name if path.parent == source else f"{path.parent.name}/{path.name}"
        for statement in statements(path.read_text()):
            header = _HEADER.match(_code(statement))
            if header is None:
                raise ValueError(
                    f"{name_of_file}: only CREATE FUNCTION/TRIGGER/VIEW/TYPE belong here: {statement[:80]!r}"
                )
            kind = header["kind"].lower()
            name = header["name"]
            if kind == "trigger":
                name = f"{header['table']}.{name}"
            found.append(Definition(kind, name, statement, name_of_file))  # type: ignore[arg-type]
    keys = [d.key for d in found]
    duplicated = {key for key in keys if keys.count(key) > 1}
    if duplicated:
        raise ValueError(f"defined more than once: {sorted(duplicated)}")
    return found


# What the database holds now, by (kind, name): functions with their identity (for DROP), types,
# triggers and views — in the public schema, leaving out what extensions own, of every kind (Citus
# puts views such as citus_tables in public; DROP would fail: the extension requires them).
_PRESENT = """
SELECT 'function', p.proname, p.oid::regprocedure::text
FROM pg_proc p
WHERE p.pronamespace = 'public'::regnamespace
  AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid
                                              AND d.deptype = 'e')
UNION ALL
SELECT 'type', t.typname, t.typname
FROM pg_type t JOIN pg_class c ON c.oid = t.typrelid
WHERE t.typnamespace = 'public'::regnamespace AND c.relkind = 'c'
  AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_type'::regclass AND d.objid = t.oid
                                              AND d.deptype = 'e')
UNION ALL
SELECT 'trigger', c.relname || '.' || tg.tgname, format('%I ON %I', tg.tgname, c.relname)
FROM pg_trigger tg JOIN pg_class c ON c.oid = tg.tgrelid
WHERE NOT tg.tgisinternal AND c.relnamespace = 'public'::regnamespace
  AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid
                                              AND d.deptype = 'e')
UNION ALL
SELECT 'view', c.relname, format('%I', c.relname)
FROM pg_class c
WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'v'
  AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid
                                              AND d.deptype = 'e')
"""

_TYPE_ATTRIBUTES = """
SELECT a.attname, format_type(a.atttypid, a.atttypmod)
FROM pg_type t JOIN pg_attribute a ON a.attrelid = t.typrelid
WHERE t.typname = %s AND t.typnamespace = 'public'::regnamespace AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum
"""

_TRIGGER_DEFINITION = """
SELECT pg_get_triggerdef(tg.oid)
FROM pg_trigger tg JOIN pg_class c ON c.oid = tg.tgrelid
WHERE c.relnamespace = 'public'::regnamespace AND c.relname = %s AND tg.tgname = %s
"""

_FUNCTIONS_NAMED = """
SELECT p.oid::regprocedure::text FROM pg_proc p
WHERE p.pronamespace = 'public'::regnamespace AND p.proname = %s
"""

_ALIASES = {"timestamptz": "timestamp with time zone", "int": "integer", "int4": "integer", "bool": "boolean"}


def prepare(conn: Connection) -> None:
    """The settings, local to the caller's transaction, the database code is made under: function
    bodies are checked when they run, not when they are created; on Citus, a trigger on a
    distributed table may be made (each fires on its shard and touches only the same conversation's
    rows: docs/scaling.md). Migrations 0020 and later call it through
    ``service.db.migration_steps.make_code``: changing it changes them."""
    conn.execute("SET LOCAL check_function_bodies = off")
    if conn.execute("SELECT to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL").fetchone() == (True,):
        conn.execute("SET LOCAL citus.enable_unsafe_triggers = on")


def record(conn: Connection, definition: Definition) -> None:
    """Keep ``definition``'s checksum in ``database_code``: :func:`apply` leaves it alone from then
    on while its text stays the same. Migrations 0018 and later record what they make through
    ``service.db.migration_steps.make_code``: changing it changes them."""
    conn.execute(
        "INSERT INTO database_code (kind, name, checksum) VALUES (%s, %s, %s)"
        " ON CONFLICT (kind, name) DO UPDATE SET checksum = EXCLUDED.checksum, applied_at = now()",
        (definition.kind, definition.name, definition.checksum),
    )


def _present(conn: Connection) -> dict[tuple[str, str], list[str]]:
    present: dict[tuple[str, str], list[str]] = {}
    for kind, name, identity in conn.execute(_PRESENT).fetchall():
        present.setdefault((kind, name), []).append(identity)
    return present


def apply(conn: Connection, apps: Sequence[Path], source: Path = SOURCE, *, drop: bool = True) -> list[str]:
    """Bring the database code of ``conn``'s database in line with the files of ``source`` and of
    the app folders ``apps`` (``Registry.folders``), in the caller's transaction. Answers what it
    created, replaced or dropped.

    With ``drop=False`` (``migrate``, while the release before still serves) no function and no
    type is dropped: neither one the files no longer hold nor the overload a function whose
    arguments changed leaves behind. A call that began before this transaction commits may still
    be running the bodies as they were, which name them: Postgres plans a PL/pgSQL statement when it
    first runs, so a body compiled before the commit and planned after it would find its type or
    function gone (``make upgrade`` saw ``type "outbox_entry" does not exist``). :func:`drop_unwanted`
    drops them, in a transaction of its own, once every transaction older than this one's commit has
    ended (:func:`wait_for_older_transactions`). Triggers and views no longer held go at once, as
    before (no body names them)."""
    prepare(conn)
    wanted = definitions(source, apps)
    present = _present(conn)
    recorded = {
        (kind, name): checksum
        for kind, name, checksum in conn.execute("SELECT kind, name, checksum FROM database_code").fetchall()
    }
    changes = _drop_unwanted(conn, wanted, present, ("trigger", "view"))

    for definition in wanted:
        key = definition.key
        if key in present and recorded.get(key) == definition.checksum:
            continue
        if key in present and key not in recorded and _same_as_present(conn, definition):
            pass  # made before its checksum was kept: adopted as it is
        elif definition.kind == "type" and key in present:
            raise RuntimeError(
                f"type {definition.name} ({definition.source}) differs from the database's: a type never"
                " changes in place; define the new shape under a new name"
            )
        else:
            _create(conn, definition, present.get(key, []), drop_overloads=drop)
            changes.append(
                f"{'replaced' if key in present else 'created'} {definition.kind} {definition.name}"
            )
        record(conn, definition)

    if drop:
        changes += drop_unwanted(conn, apps, source)
    pin_search_paths(conn)  # part of each create or replace: not a change of its own
    changes += declare_tools(conn, declared_tools(apps))
    return changes


def drop_unwanted(conn: Connection, apps: Sequence[Path], source: Path = SOURCE) -> list[str]:
    """Drop, in the caller's transaction, what :func:`apply` with ``drop=False`` left: every trigger,
    view, function and type of the public schema the files no longer hold (in that order, each
    before what it may depend on), and every overload of a function the files hold other than the
    one they declare. Answers what it dropped; nothing, a second time."""
    prepare(conn)
    wanted = definitions(source, apps)
    present = _present(conn)
    changes: list[str] = []
    for definition in wanted:
        identities = present.get(definition.key, [])
        if definition.kind != "function" or len(identities) < 2:
            continue
        declared = _declared_identity(conn, definition)
        if declared not in identities:
            raise RuntimeError(f"function {definition.name}: none of {identities} is the files' {declared}")
        for identity in identities:
            if identity != declared:
                conn.execute(f"DROP FUNCTION {identity}")
                changes.append(f"dropped function {identity}, an overload its new arguments left")
        present[definition.key] = [declared]
    changes += _drop_unwanted(conn, wanted, present, ("trigger", "view", "function", "type"))
    _forget_unwanted(conn, {d.key for d in wanted})
    return changes


def leaving(conn: Connection, apps: Sequence[Path], source: Path = SOURCE) -> set[str]:
    """The names of the functions :func:`apply` made (``database_code`` holds them) that the files no
    longer hold and that are not dropped yet (``apply`` with ``drop=False``): on their way out,
    their privileges are left as they are (``service.db.roles.grant``) until they go."""
    wanted = {d.name for d in definitions(source, apps) if d.kind == "function"}
    cursor = conn.cursor(row_factory=tuple_row)
    if cursor.execute("SELECT to_regclass('database_code')").fetchone() == (None,):
        return set()  # not migrated yet
    rows = cursor.execute(
        "SELECT d.name FROM database_code d WHERE d.kind = 'function' AND EXISTS"
        " (SELECT 1 FROM pg_proc p WHERE p.pronamespace = 'public'::regnamespace AND p.proname = d.name)"
    ).fetchall()
    return {row[0] for row in rows} - wanted


def _drop_unwanted(
    conn: Connection,
    wanted: Sequence[Definition],
    present: dict[tuple[str, str], list[str]],
    kinds: Sequence[str],
) -> list[str]:
    wanted_keys = {d.key for d in wanted}
    changes = []
    for kind in kinds:
        for key, identities in present.items():
            if key[0] == kind and key not in wanted_keys:
                for identity in identities if kind in ("function", "type") else identities[:1]:
                    conn.execute(f"DROP {kind.upper()} IF EXISTS {identity}")
                changes.append(f"dropped {kind} {key[1]}")
    return changes


# A parameter of a function's header: its mode, then its name (absent for a lone type), its type, and
# any default (DEFAULT … or = …).
_PARAMETER_MODE = re.compile(r"^(IN|OUT|INOUT|VARIADIC)\s+", re.IGNORECASE)
_PARAMETER_DEFAULT = re.compile(r"\s+(DEFAULT\b|=).*$", re.IGNORECASE | re.DOTALL)


def _declared_identity(conn: Connection, definition: Definition) -> str:
    """The identity (``name(type, …)``, as ``regprocedure`` prints it) of the function
    ``definition`` declares: its header's input parameter types, resolved by Postgres."""
    sql = _code(definition.sql)
    start = re.search(rf"FUNCTION\s+{definition.name}\s*\(", sql, re.IGNORECASE)
    if start is None:
        raise ValueError(f"function {definition.name}: no header")
    depth, end = 1, start.end()
    while depth:
        depth += {"(": 1, ")": -1}.get(sql[end], 0)
        end += 1
    types = []
    for parameter in re.split(r",(?![^()]*\))", sql[start.end() : end - 1]):
        parameter = _PARAMETER_DEFAULT.sub("", parameter.strip())
        if not parameter:
            continue
        mode = _PARAMETER_MODE.match(parameter)
        if mode is not None and mode.group(1).upper() == "OUT":
            continue
        parameter = parameter[mode.end() :] if mode is not None else parameter
        words = parameter.split(None, 1)
        # Every parameter of the files is named but a lone one-word type (status_code(tool_calls)).
        types.append(words[1] if len(words) == 2 else words[0])
    signature = f"{definition.name}({', '.join(types)})"
    cursor = conn.cursor(row_factory=tuple_row)
    row = cursor.execute("SELECT to_regprocedure(%s)::text", (signature,)).fetchone()
    if row is None or row[0] is None:
        raise RuntimeError(f"function {signature} does not exist")
    return str(row[0])


#: How long ``migrate`` waits for the transactions begun before its new database code to end before
#: it drops what that code no longer holds (``migrations/env.py``).
DROP_WAIT_SECONDS = 60.0

# Every transaction of the database's other sessions: each holds the lock on its own virtual
# transaction id until it ends (what CREATE INDEX CONCURRENTLY waits on). pg_locks and the database
# of each session (pg_stat_activity.datid) are shown to every role.
_OPEN_TRANSACTIONS = """
SELECT l.virtualxid FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'virtualxid' AND l.mode = 'ExclusiveLock' AND l.granted
  AND a.datid = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND l.pid <> pg_backend_pid()
"""
_STILL_OPEN = """
SELECT l.pid FROM pg_locks l
WHERE l.locktype = 'virtualxid' AND l.mode = 'ExclusiveLock' AND l.granted AND l.virtualxid = ANY(%s)
"""


def wait_for_older_transactions(conn: Connection, timeout: float, *, pause: float = 0.05) -> list[int]:
    """Wait until every transaction of the database's other sessions open now has ended, for at most
    ``timeout`` seconds; answers the processes of those still open then (none: all ended). Run it
    on an autocommit connection, after the commit the waiting is for."""
    cursor = conn.cursor(row_factory=tuple_row)
    ids = [row[0] for row in cursor.execute(_OPEN_TRANSACTIONS).fetchall()]
    deadline = time.monotonic() + timeout
    while ids:
        still = [row[0] for row in cursor.execute(_STILL_OPEN, (ids,)).fetchall()]
        if not still or time.monotonic() >= deadline:
            return sorted(still)
        time.sleep(pause)
    return []


@dataclass(frozen=True, slots=True)
class ToolDeclaration:
    """What a Tool declares of the operations it opens (its manifest's ``"operation"``), as the
    engine holds every Tool's to it (``app_tools``, ``service/db/sql/75_app_api.sql``)."""

    tool: str
    app_scope: str
    one_running: bool
    max_seconds: int


def declared_tools(folders: Iterable[Path]) -> list[ToolDeclaration]:
    """The declarations of the Tools of the app folders' manifests (``<folder>/manifest.json``) that
    open operations. The manifests are checked against their schema when the service loads them
    (``service.manifests``); here only what the engine holds is read."""
    found = []
    for folder in folders:
        manifest = json.loads((folder / "manifest.json").read_text())
        for tool in manifest["tools"]:
            if "operation" in tool:
                found.append(
                    ToolDeclaration(
                        tool=tool["name"],
                        app_scope=manifest["app_scope"],
                        one_running=bool(tool["operation"].get("one_running_per_conversation", False)),
                        max_seconds=int(tool["operation"]["max_seconds"]),
                    )
                )
    return found


_DECLARE = """
INSERT INTO app_tools (tool, app_scope, one_running, max_seconds)
SELECT * FROM unnest(%s::text[], %s::text[], %s::boolean[], %s::integer[])
ON CONFLICT (tool) DO UPDATE
SET app_scope = EXCLUDED.app_scope, one_running = EXCLUDED.one_running, max_seconds = EXCLUDED.max_seconds
WHERE (app_tools.app_scope, app_tools.one_running, app_tools.max_seconds)
      IS DISTINCT FROM (EXCLUDED.app_scope, EXCLUDED.one_running, EXCLUDED.max_seconds)
RETURNING tool
"""

# A running operation of a Tool whose declaration changed (or that opened before the Tool declared
# anything, such as under the release before migration 0024) is held to it from now on.
_HOLD_RUNNING = """
UPDATE operations o SET one_running = t.one_running
FROM app_tools t
WHERE o.tool = t.tool AND o.state = 'focusing' AND o.one_running IS DISTINCT FROM t.one_running
"""


def declare_tools(
    conn: Connection, declarations: Iterable[ToolDeclaration], *, only_these: bool = True
) -> list[str]:
    """Bring ``app_tools`` in line with ``declarations`` (``only_these``: a Tool no longer declared is
    forgotten) and hold the running operations to them. Answers what changed."""
    rows = list(declarations)
    cursor = conn.cursor(row_factory=tuple_row)  # whatever rows the caller's connection makes
    declared = cursor.execute(
        _DECLARE,
        (
            [d.tool for d in rows],
            [d.app_scope for d in rows],
            [d.one_running for d in rows],
            [d.max_seconds for d in rows],
        ),
    ).fetchall()
    changes = [f"declared tool {tool}" for (tool,) in declared]
    if only_these:
        forgotten = cursor.execute(
            "DELETE FROM app_tools WHERE tool <> ALL(%s::text[]) RETURNING tool", ([d.tool for d in rows],)
        ).fetchall()
        changes += [f"forgot tool {tool}" for (tool,) in forgotten]
    if changes:
        cursor.execute(_HOLD_RUNNING)
    return changes


#: The search_path every function of the files runs with: its own schema, then pg_temp (last, so a
#: temporary table or function of the caller's session can never stand in for one of ours).
SEARCH_PATH = "public, pg_temp"

# Functions whose names are looked up when they run (PL/pgSQL, or SQL with a string body) and that
# do not run with SEARCH_PATH yet. A SQL function with a SQL-standard body (RETURN … / BEGIN ATOMIC)
# had its names resolved when it was created, whatever the caller's search_path, and keeps no
# SET clause: one would stop Postgres from inlining it into the calling query.
_UNPINNED = """
SELECT p.oid::regprocedure::text
FROM pg_proc p
WHERE p.pronamespace = 'public'::regnamespace AND p.prosqlbody IS NULL
  AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid
                                              AND d.deptype = 'e')
  AND NOT (coalesce(p.proconfig, '{}') @> ARRAY['search_path=' || %s])
ORDER BY 1
"""


def pin_search_paths(conn: Connection) -> list[str]:
    """Give every function that needs it the fixed search_path (a ``CREATE OR REPLACE`` drops it,
    so this runs after each apply and touches only those without it)."""
    pinned = []
    for (identity,) in conn.execute(_UNPINNED, (SEARCH_PATH,)).fetchall():
        conn.execute(f"ALTER FUNCTION {identity} SET search_path = {SEARCH_PATH}")
        pinned.append(f"pinned the search_path of {identity}")
    return pinned


def _forget_unwanted(conn: Connection, wanted: set[tuple[str, str]]) -> None:
    kinds = [kind for kind, _ in sorted(wanted)]
    names = [name for _, name in sorted(wanted)]
    conn.execute(
        "DELETE FROM database_code d WHERE (d.kind, d.name) NOT IN"
        " (SELECT * FROM unnest(%s::text[], %s::text[]))",
        (kinds, names),
    )


def _create(
    conn: Connection, definition: Definition, identities: list[str], *, drop_overloads: bool = True
) -> None:
    if definition.kind == "function":
        try:
            with conn.transaction():
                conn.execute(definition.sql)
        except psycopg.errors.InvalidFunctionDefinition:  # its result or argument names changed
            for identity in identities:
                conn.execute(f"DROP FUNCTION {identity}")
            conn.execute(definition.sql)
            return
        # Its arguments changed: the function it replaces is another overload of the name now
        # (left for drop_unwanted unless ``drop_overloads``).
        now = {identity for (identity,) in conn.execute(_FUNCTIONS_NAMED, (definition.name,)).fetchall()}
        if drop_overloads and now - set(identities):
            for identity in identities:
                conn.execute(f"DROP FUNCTION {identity}")
    elif definition.kind == "view":
        try:
            with conn.transaction():
                conn.execute(definition.sql)
        except psycopg.errors.InvalidTableDefinition:  # its columns changed
            conn.execute(f"DROP VIEW {identities[0]}")
            conn.execute(definition.sql)
    else:
        conn.execute(definition.sql)


def _normal(sql: str) -> str:
    text = " ".join(_code(sql).replace(";", " ").split())
    return re.sub(r"\bOR REPLACE ", "", text).replace(" ON public.", " ON ")


def _same_as_present(conn: Connection, definition: Definition) -> bool:
    """A type or trigger that exists but has no checksum kept: is it what the file says?"""
    if definition.kind == "type":
        sql = _code(definition.sql)
        wanted = []
        for attribute in sql[sql.index("(") + 1 : sql.rindex(")")].split(","):
            name, type_name = attribute.split(None, 1)
            wanted.append((name, _ALIASES.get(type_name.strip().lower(), type_name.strip().lower())))
        return [tuple(row) for row in conn.execute(_TYPE_ATTRIBUTES, (definition.name,)).fetchall()] == wanted
    if definition.kind == "trigger":
        table, name = definition.name.split(".", 1)
        rows = conn.execute(_TRIGGER_DEFINITION, (table, name)).fetchall()
        return bool(rows) and _normal(rows[0][0]) == _normal(definition.sql)
    return False  # functions and views are replaced: that takes no lock on a table

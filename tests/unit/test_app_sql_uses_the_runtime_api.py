"""A MiniApp's SQL asks the engine through the Runtime's API (service/db/sql/75_app_api.sql) and
never writes the engine's tables itself: every app folder's SQL — the shipped apps', the test-only
ones' — is parsed (pglast: Postgres's own parser and scanner, function bodies included) and any
INSERT, UPDATE, DELETE, MERGE, TRUNCATE or COPY of an engine table, any call of the engine's own
writers behind the API, and any dynamic SQL (which no reading can check) fails the test."""

from __future__ import annotations

from pathlib import Path

import pytest
from pglast import parse_sql
from pglast.ast import CreateFunctionStmt, String
from pglast.parser import scan

ROOT = Path(__file__).resolve().parents[2]
#: The engine's tables, written only by the engine.
ENGINE_TABLES = {"operations", "workspaces", "app_instances", "outbox", "tool_calls"}
#: The engine's writers behind the API (and set_config, with which an app could pose as another).
ENGINE_WRITERS = {
    "open_instance",
    "close_instances",
    "close_instances_v2",
    "settle_focusing",
    "settle_focusing_v2",
    "settle_due",
    "settle_due_in",
    "queue_outbox",
    "set_config",
}
_WRITES = {"INSERT": "INTO", "DELETE_P": "FROM", "MERGE": "INTO"}
_TABLE_AFTER = {"UPDATE", "TRUNCATE", "COPY", "TABLE"}


def app_folders() -> list[Path]:
    """Every folder holding a MiniApp (its manifest.json), shipped or test-only."""
    return sorted(
        path.parent
        for path in [*ROOT.glob("service/apps/*/manifest.json"), *ROOT.glob("tests/**/manifest.json")]
        if ".venv" not in path.parts
    )


def _names(text: str) -> list[tuple[str, str]]:
    """(token name, lower-cased text) of ``text``'s tokens, comments left out."""
    return [
        (token.name, text[token.start : token.end + 1].lower().strip('"'))
        for token in scan(text)
        if token.name not in ("SQL_COMMENT", "C_COMMENT")
    ]


def _table_at(tokens: list[tuple[str, str]], i: int) -> str | None:
    """The table named from ``tokens[i]`` on (``schema.table`` or ``table``), if one is."""
    if i < len(tokens) and tokens[i][0] == "ONLY":
        i += 1
    if i + 2 < len(tokens) and tokens[i + 1][0] == "ASCII_46":
        i += 2
    if i < len(tokens) and tokens[i][0] == "IDENT":
        return tokens[i][1]
    return None


def forbidden(text: str) -> list[str]:
    """What in ``text`` (SQL, or a PL/pgSQL body) writes an engine table, calls an engine writer or
    runs dynamic SQL."""
    tokens = _names(text)
    found = []
    for i, (name, word) in enumerate(tokens):
        if name in _WRITES and i + 1 < len(tokens) and tokens[i + 1][0] == _WRITES[name]:
            table = _table_at(tokens, i + 2)
            if table in ENGINE_TABLES:
                found.append(f"{word} {tokens[i + 1][1]} {table}")
        elif name in _TABLE_AFTER:
            previous = tokens[i - 1][0] if i else ""
            if name == "UPDATE" and previous in ("FOR", "DO", "KEY"):
                continue  # a row lock, or ON CONFLICT's DO UPDATE of the statement's own table
            table = _table_at(tokens, i + 1)
            if table in ENGINE_TABLES:
                found.append(f"{word} {table}")
        elif (
            name == "IDENT"
            and word in ENGINE_WRITERS
            and i + 1 < len(tokens)
            and tokens[i + 1][0] == "ASCII_40"
        ):
            found.append(f"calls {word}")
        elif name == "EXECUTE" and (i + 1 == len(tokens) or tokens[i + 1][0] != "FUNCTION"):
            found.append("dynamic SQL (EXECUTE)")
    return found


def problems_of(sql: str) -> list[str]:
    """What ``sql`` (a file of CREATE statements) does that an app's SQL may not, its function bodies
    (dollar-quoted, PL/pgSQL or SQL) included."""
    found = forbidden(sql)
    for raw in parse_sql(sql):
        statement = raw.stmt
        if isinstance(statement, CreateFunctionStmt):
            name = str(statement.funcname and statement.funcname[-1].sval)
            for option in statement.options or ():
                if option.defname == "as":
                    for part in option.arg:
                        if isinstance(part, String):
                            found += [f"{name}: {what}" for what in forbidden(str(part.sval))]
    return found


def test_every_app_folder_is_checked() -> None:
    scopes = {folder.name for folder in app_folders()}
    assert {"pomodoro", "interact", "kettle_app"} <= scopes


@pytest.mark.parametrize("folder", app_folders(), ids=lambda folder: str(folder.relative_to(ROOT)))
def test_an_apps_sql_writes_no_engine_table(folder: Path) -> None:
    for path in sorted(folder.glob("*.sql")):
        assert problems_of(path.read_text()) == [], path


@pytest.mark.parametrize(
    "body",
    [
        "BEGIN INSERT INTO operations (tool) VALUES ('x'); END",
        "BEGIN UPDATE public.workspaces SET foreground_instance_id = NULL WHERE true; END",
        "BEGIN DELETE FROM app_instances WHERE true; END",
        "BEGIN UPDATE ONLY outbox SET status = 'dead'; END",
        "BEGIN PERFORM settle_focusing_v2('c', ARRAY[gen_random_uuid()], 'interrupted', 'agent_interrupt'); END",
        "BEGIN PERFORM queue_outbox(NULL); END",
        "BEGIN PERFORM set_config('lineup.acting_app', 'pomodoro', true); END",
        "BEGIN EXECUTE 'UPDATE tool_calls SET outcome = ''x'''; END",
        "BEGIN TRUNCATE tool_calls; END",
    ],
)
def test_a_write_of_an_engine_table_is_found(body: str) -> None:
    sql = f"-- x: a test.\nCREATE OR REPLACE FUNCTION x() RETURNS void LANGUAGE plpgsql AS $$\n{body}\n$$;\n"
    assert problems_of(sql) != []


def test_reads_locks_and_the_api_are_not_writes() -> None:
    body = (
        "BEGIN PERFORM 1 FROM workspaces WHERE conversation_id = 'c' FOR NO KEY UPDATE;"
        " PERFORM 1 FROM operations o WHERE o.state = 'focusing' FOR UPDATE OF o;"
        " INSERT INTO interactions (tool_call_id) VALUES ('t') ON CONFLICT DO UPDATE SET answer = 'a';"
        " PERFORM app_settle_operation('c', gen_random_uuid(), 'interrupted');"
        " -- UPDATE operations SET state = 'x' (a comment)\n"
        " RAISE NOTICE 'INSERT INTO outbox'; END"
    )
    sql = f"-- x: a test.\nCREATE OR REPLACE FUNCTION x() RETURNS void LANGUAGE plpgsql AS $$\n{body}\n$$;\n"
    assert problems_of(sql) == []

"""docs/ says what the code does: the grants table is the grants map of service/db/roles.py, the
CLI's time formats are the ones its formatters print, the runtime role's tool-call function is the
one the service calls, and /schema is the raw document unless API_DOCS_UI turns its page on."""

from __future__ import annotations

import re
from pathlib import Path

from service.cli.ops_text import short_when, when
from service.db import roles
from service.db.roles_doc import BEGIN, END, block

ROOT = Path(__file__).resolve().parents[2]
OPERATIONS = (ROOT / "docs" / "operations.md").read_text()
API = (ROOT / "docs" / "api.md").read_text()
STORED = "2026-11-30T07:50:06.904546Z"


def test_the_grants_table_in_the_docs_is_generated_from_the_roles_map() -> None:
    start, end = OPERATIONS.index(BEGIN), OPERATIONS.index(END) + len(END)
    assert OPERATIONS[start:end] == block(), "run: python -m service.db.roles_doc, and paste it"


def test_the_runtime_role_is_said_to_execute_the_call_tool_function_the_service_calls() -> None:
    calls = {
        name
        for path in (ROOT / "service").rglob("*.py")
        for name in re.findall(r"\b(call_tool_v\d+)\(", path.read_text())
    }
    assert calls, "the service calls a call_tool_vN function"
    current = max(calls, key=lambda name: int(name.rsplit("_v", 1)[1]))
    assert roles.RUNTIME in roles.ENGINE_FUNCTIONS[current]
    [runtime_row] = [line for line in OPERATIONS.splitlines() if line.startswith("| runtime (")]
    assert f"`{current}`" in runtime_row
    assert not re.search(r"`call_tool_v\d+`", runtime_row.replace(f"`{current}`", ""))


def test_the_cli_time_formats_are_the_ones_the_docs_name() -> None:
    section = OPERATIONS.split("<!-- cli-times:", 1)[1].split("\n### ", 1)[0]
    assert f"`{short_when(STORED)}`" in section  # lists
    assert f"`{when(STORED)}`" in section  # show, trace, --wide
    assert f"`{STORED}`" in section  # stored values and --json
    assert "`MM-DD HH:MM:SS`" in section and "UTC" in section
    # The examples of lists elsewhere in the doc use the same forms.
    rows = [
        line
        for line in OPERATIONS.splitlines()
        if re.match(
            r"^[0-9a-f]{8}\S*\s+(dead|pending|delivered|focusing|interrupted|completed|cancelled)\s", line
        )
    ]
    assert rows
    for line in rows:
        wide = len(line.split()[0]) == 36  # --wide: full ids, RFC 3339 times
        form = r"\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ" if wide else r"\b\d\d-\d\d \d\d:\d\d:\d\d\b"
        assert re.search(form, line), line
    assert "2026-12-01 14:03:07 UTC` everywhere" in OPERATIONS  # the console's own, said as its


def test_the_docs_say_schema_is_the_raw_document_and_its_page_needs_api_docs_ui() -> None:
    assert "browsable" not in API
    intro = API.split("Conventions, everywhere", 1)[0]
    assert "`/schema/openapi.json`" in intro and "`API_DOCS_UI=true`" in intro
    assert "`/schema/swagger`" in intro

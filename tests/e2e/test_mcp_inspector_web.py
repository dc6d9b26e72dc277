"""The MCP Inspector's web UI (npm ``@modelcontextprotocol/inspector``, the version the CLI test
pins) in headless chromium: a person connects it to a ``serve`` with MCP authorization, signs in
at the real authorization server (oidc-provider, tests/support/oidc.py) through the Inspector's
own OAuth flow (protected-resource discovery, dynamic registration, authorization code + PKCE),
then calls ``pomodoro.start`` and ``pomodoro.interrupt`` from its Tools tab and reads the results."""

from __future__ import annotations

import re
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from harness.database import DatabaseFactory
from service.mcp.binding import person_conversation_id
from tests.conftest import ServiceProcess
from tests.support.browser import chromium, eventually, requires_chromium, screenshot
from tests.support.inspector import inspector_web, sign_in
from tests.support.oauth_service import service_for_issuer
from tests.support.oidc import AuthorizationServer, authorization_server

pytestmark = [
    pytest.mark.e2e,
    requires_chromium,
    pytest.mark.skipif(shutil.which("npx") is None, reason="the MCP Inspector runs with npx (Node.js)"),
]


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("inspector-web")


@pytest.fixture(scope="module")
def idp(logs: Path) -> Iterator[AuthorizationServer]:
    with authorization_server(logs) as server:
        yield server


@pytest.fixture(scope="module")
def service(
    database_factory: DatabaseFactory, logs: Path, idp: AuthorizationServer
) -> Iterator[ServiceProcess]:
    with service_for_issuer(
        database_factory,
        logs,
        idp.issuer,
    ) as process:
        yield process


@pytest.fixture(scope="module")
def inspector(service: ServiceProcess, logs: Path) -> Iterator[str]:
    """The Inspector's web server on a loopback port; the URL of its UI. Its Node backend makes
    the MCP requests for the page (no browser ``Origin`` reaches the service, so the service needs
    no MCP_ALLOWED_ORIGINS for it)."""
    with inspector_web(f"{service.base_url}/mcp", logs) as url:
        yield url


def operation(service: ServiceProcess, conversation_id: str) -> dict[str, Any] | None:
    with psycopg.connect(service.database_url, row_factory=dict_row) as db:
        row: dict[str, Any] | None = db.execute(
            "SELECT operation_id, state, reason FROM operations WHERE conversation_id = %s",
            [conversation_id],
        ).fetchone()
    return row


def test_a_person_signs_in_from_the_inspectors_web_ui_and_starts_and_interrupts_a_period(
    inspector: str, service: ServiceProcess, idp: AuthorizationServer, logs: Path
) -> None:
    login = f"inspector-{uuid.uuid4().hex[:8]}"
    own = person_conversation_id(idp.issuer, login)
    with chromium() as context:
        context.set_default_timeout(60_000)  # a machine shared with others is slow
        page = context.new_page()
        sign_in(page, inspector, idp.url, login)

        page.get_by_text("Tools", exact=True).first.click()
        page.get_by_role("button", name=re.compile(r"pomodoro[._]start")).click()
        page.get_by_role("textbox", name=re.compile("^duration_seconds")).fill("1500")
        page.get_by_role("textbox", name="activity", exact=True).fill("inspector web")
        page.get_by_role("button", name="Execute Tool").click()
        started = eventually(lambda: operation(service, own), 60)
        assert started["state"] == "focusing"
        accepted = '{"status":"accepted","operation":{"state":"focusing",'
        page.get_by_text("A 1500-second focus period started").wait_for()
        page.get_by_text(re.compile(re.escape(accepted) + ".*" + str(started["operation_id"]))).wait_for()
        screenshot(page, "mcp-inspector-web")

        page.get_by_role("button", name=re.compile(r"pomodoro[._]interrupt")).click()
        page.get_by_role("button", name="Execute Tool").click()
        page.get_by_text("The focus period was stopped.").wait_for()
        interrupted = f'{{"status":"interrupted","operation_id":"{started["operation_id"]}"'
        page.get_by_text(interrupted).wait_for()
    stopped = operation(service, own)
    # A person's interrupt has its own reason word.
    assert stopped is not None and (stopped["state"], stopped["reason"]) == (
        "interrupted",
        "person_interrupt",
    )

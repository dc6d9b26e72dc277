"""The MCP Inspector's web UI (npm ``@modelcontextprotocol/inspector``, pinned) as a real MCP
client and MCP Apps host: its launch on loopback ports, and a person's sign-in through its own OAuth
flow at the tests' authorization server (tests/support/oidc.py)."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from harness import processes

#: The MCP Inspector, pinned, with a Node it runs on (it needs Node >= 22.19; the node package of
#: the npm registry brings one, whatever Node runs npx).
INSPECTOR = [
    "npx",
    "-y",
    "-p",
    "node@22.23.3",
    "-p",
    "@modelcontextprotocol/inspector@2.12.0",
    "mcp-inspector",
]
API_TOKEN = "lineup-inspector-web-token-5d1f0c"


@contextmanager
def inspector_web(mcp_url: str, logs: Path) -> Iterator[str]:
    """The Inspector's web server (and its own MCP Apps sandbox server) on loopback ports; the URL of
    its UI. Its Node backend makes the MCP requests for the page; its API token is ours; the OAuth
    tokens it gets stay in memory."""
    port = processes.free_port()
    env = {
        **processes.environment({}),
        "CLIENT_PORT": str(port),
        "MCP_SANDBOX_PORT": str(processes.free_port()),
        "MCP_INSPECTOR_API_TOKEN": API_TOKEN,
        "MCP_AUTO_OPEN_ENABLED": "false",
        "MCP_INSPECTOR_SECRET_STORE": "memory",
        "MCP_STORAGE_DIR": str(logs / "inspector-storage"),  # not ~/.mcp-inspector
    }
    command = [*INSPECTOR, "--web", "--transport", "http", "--server-url", mcp_url]
    process = processes.launch(command, logs / f"inspector-{port}.log", env, new_group=True)
    url = f"http://127.0.0.1:{port}"
    try:
        processes.wait_http(url, 300.0, process)
        yield url
    finally:
        processes.stop(process, group=True)


def open_ui(page: Any, inspector: str) -> None:
    page.goto(f"{inspector}/?MCP_INSPECTOR_API_TOKEN={API_TOKEN}")


def connect(page: Any) -> None:
    page.get_by_role("switch", name=re.compile("Connect or disconnect")).click(force=True)


def sign_in(page: Any, inspector: str, idp_url: str, login: str) -> None:
    """Connect and sign in as ``login``: the Inspector meets the 401, reads the protected-resource
    metadata, registers itself with the authorization server and sends the browser to its sign-in
    (code + PKCE); then back in the Inspector, connected."""
    open_ui(page, inspector)
    connect(page)
    page.wait_for_url(f"{idp_url}/interaction/**")
    _log_in(page, inspector, login)


def reconnect(page: Any, inspector: str, idp_url: str, login: str, seconds: float = 60) -> None:
    """After a reload of the Inspector's page: connect again, signing in again if it asks."""
    connected = page.get_by_text("Connected", exact=True)
    if not connected.is_visible():
        connect(page)
    deadline = time.monotonic() + seconds
    while not connected.is_visible():
        if page.url.startswith(f"{idp_url}/interaction/"):
            _log_in(page, inspector, login)
            return
        assert time.monotonic() < deadline, "the Inspector did not connect again"
        page.wait_for_timeout(250)


def _log_in(page: Any, inspector: str, login: str) -> None:
    page.fill("input[name=login]", login)
    page.fill("input[name=password]", "any")
    page.click("button[type=submit]")
    page.get_by_role("button", name="Continue").click()  # the consent page
    page.wait_for_url(f"{inspector}/**")
    page.get_by_text("Connected", exact=True).wait_for()

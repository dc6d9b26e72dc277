"""A sign-in link opened from another site signs nobody in: the host page and the operator
console show what the link would do and wait for the person's click (Chromium, two sites:
``localhost`` for the other site, ``127.0.0.1`` for the service)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from tests.conftest import HOST, OPERATOR_TOKEN, ServiceProcess
from tests.support.browser import chromium, module_service, requires_chromium

pytestmark = [pytest.mark.e2e, requires_chromium]


service = pytest.fixture(scope="module", name="service")(module_service)


@pytest.fixture
def other_site() -> Iterator[Callable[[str], str]]:
    """A page on another site (``localhost``) that sends its visitor to a URL at once."""
    targets: dict[str, str] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            target = targets.get(self.path, "about:blank")
            body = f'<!doctype html><meta http-equiv="refresh" content="0;url={target}">'.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()

    def page_sending_to(target: str) -> str:
        path = f"/{len(targets)}"
        targets[path] = target
        return f"http://localhost:{server.server_address[1]}{path}"

    yield page_sending_to
    server.shutdown()
    server.server_close()


def attackers_session(base_url: str) -> str:
    response = httpx.post(
        f"{base_url}/v1/host/sessions",
        json={"subject": "mallory@elsewhere.example", "conversation_ids": ["mallory-listens"]},
        headers=HOST,
        timeout=10,
    )
    response.raise_for_status()
    return str(response.json()["session"])


def test_a_link_from_another_site_shows_whom_it_signs_in_as_and_signs_nobody_in(
    service: ServiceProcess, other_site: Callable[[str], str]
) -> None:
    token = attackers_session(service.base_url)
    link = f"{service.base_url}/host/?conversation_id=mallory-listens#token={quote(token, safe='')}"
    with chromium() as browser:
        page = browser.new_page()
        page.goto(other_site(link))
        page.wait_for_url(f"{service.base_url}/host/?conversation_id=mallory-listens")
        page.wait_for_selector('[data-testid="signin-preview"]:not([hidden])')
        assert page.locator('[data-testid="signin-subject"]').inner_text() == "mallory@elsewhere.example"
        page.wait_for_timeout(500)  # what an automatic sign-in would have taken
        assert browser.cookies() == []
        assert page.locator('[data-testid="interact"]').count() == 0
        assert (
            page.locator('[data-testid="signin-submit"]').inner_text()
            == "Sign in as mallory@elsewhere.example"
        )


def test_a_console_link_from_another_site_signs_nobody_in(
    service: ServiceProcess, other_site: Callable[[str], str]
) -> None:
    link = f"{service.base_url}/ops/#token={quote(OPERATOR_TOKEN, safe='')}"
    with chromium() as browser:
        page = browser.new_page()
        page.goto(other_site(link))
        page.wait_for_selector('[data-testid="signin-preview"]:not([hidden])')
        page.wait_for_timeout(500)
        assert browser.cookies() == []
        assert page.url.rstrip("/") == f"{service.base_url}/ops"  # the token left the address bar
        page.click('[data-testid="signin-submit"]')  # the operator's own click signs in
        page.wait_for_selector('[data-testid="ops-overview"]')
        assert [c["name"] for c in browser.cookies()] == ["lineup_ops_session"]

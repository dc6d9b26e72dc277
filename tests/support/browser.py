"""Debian's chromium driven by the playwright package, for the Web Host's browser tests.

``playwright install`` cannot download browsers here: the tests use ``/usr/bin/chromium`` and
skip, saying so, only when it is absent (CI installs it with apt). The tests of a module share one
chromium, each test in a fresh context of it (its own cookies and storage).
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import psycopg
import pytest
from psycopg.rows import dict_row

from harness.calls import interrupt_body, start_body
from harness.database import DatabaseFactory
from tests.conftest import AGENT, HOST, HOST_TOKEN, ServiceProcess, service_on_own_database

if TYPE_CHECKING:
    from playwright.sync_api import ViewportSize

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
VIEWPORT: ViewportSize = {"width": 1280, "height": 760}
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
COUNTDOWN = re.compile(r"^(\d+):([0-5]\d)$")

requires_chromium = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="Debian's chromium is not installed at /usr/bin/chromium (apt-get install chromium)",
)


class _ModuleChromium:
    """The chromium that the contexts of one test module share (launched by the first of them).

    Sync playwright marks its event loop as the thread's running loop between calls, so it must
    be stopped before an asyncio test runs: ``close_module_chromium`` (an autouse module fixture of
    tests/conftest.py) stops it at the end of each module."""

    def __init__(self) -> None:
        self.manager: Any = None
        self.browser: Any = None

    def get(self) -> Any:
        if self.browser is None:
            from playwright.sync_api import sync_playwright

            self.manager = sync_playwright()
            playwright = self.manager.start()
            try:
                self.browser = playwright.chromium.launch(
                    executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
                )
            except BaseException:
                self.close()
                raise
        return self.browser

    def close(self) -> None:
        browser, manager = self.browser, self.manager
        self.browser = self.manager = None
        try:
            if browser is not None:
                browser.close()
        finally:
            if manager is not None:
                manager.__exit__(None, None, None)


_MODULE_CHROMIUM = _ModuleChromium()


def close_module_chromium() -> None:
    """Stop the module's chromium, if a test of it started one."""
    _MODULE_CHROMIUM.close()


@contextmanager
def chromium(user_data_dir: Path | None = None, **options: Any) -> Iterator[Any]:
    """A fresh chromium context: its own cookies, storage and cache, as a new profile has
    (``options``: playwright's, such as ``locale`` and ``timezone_id``).

    Without ``user_data_dir`` it is a context of the module's one chromium (a launch costs more
    than the rest of most browser tests); with it, a persistent context on that profile folder, in
    a chromium of its own, for a test that needs a profile on disk."""
    if user_data_dir is not None:
        with _persistent_chromium(user_data_dir, **options) as context:
            yield context
        return
    context = _MODULE_CHROMIUM.get().new_context(**{"viewport": VIEWPORT, **options})
    context.set_default_timeout(10_000)
    try:
        yield context
    finally:
        context.close()


@contextmanager
def _persistent_chromium(user_data_dir: Path, **options: Any) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(user_data_dir),
            executable_path=str(CHROMIUM),
            headless=True,
            args=CHROMIUM_ARGS,
            viewport=VIEWPORT,
            **options,
        )
        context.set_default_timeout(10_000)
        try:
            yield context
        finally:
            context.close()


# A browser module's shared service; each test module makes these fixtures its own with
# ``pytest.fixture`` (``service`` with ``scope="module"``).


def module_service(
    database_factory: DatabaseFactory, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServiceProcess]:
    """One service for the module, on a database of its own: each test signs in to a conversation
    of its own (``own_conversation``), so none sees another's workspace."""
    with service_on_own_database(database_factory, tmp_path_factory.mktemp("web-host")) as process:
        yield process


def own_conversation() -> str:
    """A conversation no other test of the module uses."""
    return f"web-{uuid.uuid4().hex[:12]}"


def service_db(service: ServiceProcess) -> Iterator[psycopg.Connection[dict[str, Any]]]:
    """A direct connection to the module's service's database (autocommit, dict rows)."""
    with psycopg.connect(service.database_url, autocommit=True, row_factory=dict_row) as conn:
        yield conn


# Playwright reports uncaught errors of the main frame only; in every frame (the sandboxed app
# iframes included; init scripts are not subject to the page's CSP) they become console errors.
_REPORT_UNCAUGHT = """
addEventListener("error", (event) => console.error("uncaught: " + event.message));
addEventListener("unhandledrejection", (event) => console.error("unhandled rejection: " + event.reason));
"""


@dataclass
class PageProblems:
    """Uncaught errors and console errors of a page and its frames; a test ends with none."""

    found: list[str] = field(default_factory=list)
    expected: list[str] = field(default_factory=list)

    def expect(self, text: str) -> None:
        """Chromium logs every 4xx a fetch gets as a console error; a test that provokes some says so."""
        self.expected.append(text)

    def watch(self, page: Any) -> None:
        """From the next navigation of ``page`` on."""
        page.add_init_script(_REPORT_UNCAUGHT)
        page.on("pageerror", lambda error: self.found.append(f"pageerror: {error}"))
        page.on("console", lambda message: self._console(message))

    def _console(self, message: Any) -> None:
        if message.type == "error" and not any(text in message.text for text in self.expected):
            self.found.append(f"console error: {message.text} at {message.location}")


def screenshot(page: Any, name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path))
    return path


def person_session(base_url: str, *conversation_ids: str) -> str:
    """A person's session token for these conversations, minted with HOST_TOKEN as a Host backend
    does."""
    response = httpx.post(
        f"{base_url}/v1/host/sessions",
        json={"subject": "a person", "conversation_ids": list(conversation_ids)},
        headers={"Authorization": f"Bearer {HOST_TOKEN}"},
        timeout=10,
    )
    response.raise_for_status()
    return str(response.json()["session"])


def sign_in(page: Any, base_url: str, conversation_id: str, token: str | None = None) -> None:
    page.goto(f"{base_url}/host/?conversation_id={conversation_id}")
    page.fill("input[name=token]", token or person_session(base_url, conversation_id))
    page.click("form[data-testid=signin] button[type=submit]")


def wait_live(page: Any) -> None:
    page.wait_for_selector('[data-testid="connection"][data-state="live"]')


def start_pomodoro(base_url: str, conversation_id: str, seconds: int, activity: str) -> dict[str, Any]:
    response = httpx.post(
        f"{base_url}/v1/tool-calls",
        headers=AGENT,
        json=start_body(conversation_id, seconds, activity),
    )
    assert response.status_code == 202, response.text
    started: dict[str, Any] = response.json()
    return started


def interrupt_pomodoro(base_url: str, conversation_id: str) -> dict[str, Any]:
    response = httpx.post(
        f"{base_url}/v1/tool-calls",
        headers=AGENT,
        json=interrupt_body(conversation_id),
    )
    assert response.status_code == 200, response.text
    stopped: dict[str, Any] = response.json()
    return stopped


def post_message(base_url: str, conversation_id: str, role: str, text: str) -> dict[str, Any]:
    response = httpx.post(
        f"{base_url}/v1/host/conversations/{conversation_id}/messages",
        headers=HOST,
        json={"role": role, "text": text},
    )
    assert response.status_code == 201, response.text
    message: dict[str, Any] = response.json()
    return message


def timeline(page: Any) -> list[tuple[str, str, str, str]]:
    """The Interact timeline as a person reads it: (kind, who, text, time) per row, top to bottom."""
    rows: list[list[str]] = page.eval_on_selector_all(
        '[data-testid="timeline"] > li',
        """items => items.map(item => [
            item.dataset.testid, item.querySelector(".who").textContent,
            item.querySelector(".text").textContent, item.querySelector(".at").textContent])""",
    )
    return [(kind, who, text, at) for kind, who, text, at in rows]


def timeline_scroll(page: Any) -> dict[str, int]:
    """How far the timeline is scrolled: ``below`` is what lies under its visible part."""
    scroll: dict[str, int] = page.eval_on_selector(
        '[data-testid="timeline"]',
        """t => ({height: t.scrollHeight, visible: t.clientHeight,
                 below: Math.round(t.scrollHeight - t.scrollTop - t.clientHeight)})""",
    )
    return scroll


def operation(base_url: str, operation_id: str) -> dict[str, Any]:
    response = httpx.get(f"{base_url}/v1/operations/{operation_id}", headers=AGENT)
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()
    return found


def app_frame(page: Any, scope: str) -> Any:
    element = page.wait_for_selector(f'iframe[data-app-scope="{scope}"]')
    frame = element.content_frame()
    assert frame is not None
    return frame


def countdown_seconds(frame: Any) -> int:
    """The countdown's value once it shows M:SS."""
    locator = frame.locator('[data-testid="countdown"]')
    deadline = time.monotonic() + 10
    text = locator.inner_text()
    while not COUNTDOWN.match(text) and time.monotonic() < deadline:
        time.sleep(0.05)
        text = locator.inner_text()
    found = COUNTDOWN.match(text)
    assert found, f"countdown reads {text!r}, not M:SS"
    return int(found.group(1)) * 60 + int(found.group(2))


def eventually(check: Callable[[], Any], seconds: float = 10.0, every: float = 0.1) -> Any:
    """The first truthy value of ``check()`` within ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            assert value, f"not within {seconds}s: {check}"
            return value
        time.sleep(every)

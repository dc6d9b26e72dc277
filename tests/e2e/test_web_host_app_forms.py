"""The Web Host in a real browser answers an app's forms of its own (the Runtime API's ``app_ask``,
asked by the conformance fixture app's tools): each form a card of fields as its requestedSchema
says, with its defaults; an answer that does not fit is refused and the form stays; a good one
decides it once and the call's result is in the outbox."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness.database import DatabaseFactory
from tests.conftest import AGENT_TOKEN, ServiceProcess, service_on_own_database
from tests.support.browser import (
    chromium,
    eventually,
    own_conversation,
    requires_chromium,
    service_db,
    sign_in,
    wait_live,
)

pytestmark = [pytest.mark.e2e, requires_chromium]

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "conformance_app"


@pytest.fixture(scope="module")
def service(
    database_factory: DatabaseFactory, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServiceProcess]:
    with service_on_own_database(
        database_factory, tmp_path_factory.mktemp("web-host-forms"), APP_FOLDERS=str(FIXTURES)
    ) as process:
        yield process


@pytest.fixture
def browser() -> Iterator[Any]:
    with chromium() as context:
        yield context


conversation = pytest.fixture(name="conversation")(own_conversation)
db = pytest.fixture(name="db")(service_db)


def ask(base_url: str, conversation_id: str, tool: str, arguments: dict[str, Any]) -> str:
    call_id = f"form-{uuid.uuid4()}"
    response = httpx.post(
        f"{base_url}/v1/tool-calls",
        json={
            "tool_call_id": call_id,
            "conversation_id": conversation_id,
            "tool": tool,
            "arguments": arguments,
        },
        headers={"Authorization": f"Bearer {AGENT_TOKEN}"},
        timeout=10,
    )
    assert response.status_code == 202, response.text
    return call_id


def test_the_forms_with_their_defaults_are_answered_in_the_page(
    service: ServiceProcess, browser: Any, conversation: str, db: Any
) -> None:
    call_id = ask(service.base_url, conversation, "conformance.test-elicitation-sep1034-defaults", {})
    page = browser.new_page()
    sign_in(page, service.base_url, conversation)
    wait_live(page)
    form = page.locator('[data-testid="app-form"][data-form="form"]')

    def field(name: str) -> Any:
        return form.locator(f'[data-testid="form-field"][data-field="{name}"]')

    assert field("name").input_value() == "John Doe"
    assert field("age").input_value() == "30"
    assert field("score").input_value() == "95.5"
    assert field("status").input_value() == "active"
    assert field("verified").is_checked()
    field("name").fill("Jane Smith")
    field("age").fill("25")
    field("status").select_option("inactive")
    field("verified").uncheck()
    form.locator('[data-testid="answer"]').click()
    eventually(lambda: page.locator('[data-testid="app-form"]').count() == 0)
    (row,) = db.execute("SELECT payload FROM outbox WHERE tool_call_id = %s", (call_id,)).fetchall()
    assert row["payload"]["result"]["answers"] == {
        "form": {"name": "Jane Smith", "age": 25, "score": 95.5, "status": "inactive", "verified": False}
    }


def test_two_forms_each_answered_on_its_own(
    service: ServiceProcess, browser: Any, conversation: str, db: Any
) -> None:
    call_id = ask(service.base_url, conversation, "conformance.multi-input", {})
    page = browser.new_page()
    sign_in(page, service.base_url, conversation)
    wait_live(page)
    assert page.locator('[data-testid="app-form"]').count() == 2
    name = page.locator('[data-testid="app-form"][data-form="name"]')
    name.locator('[data-field="name"]').fill("Ada")
    name.locator('[data-testid="answer"]').click()
    eventually(lambda: page.locator('[data-testid="app-form"]').count() == 1)
    assert (
        db.execute("SELECT count(*) AS n FROM outbox WHERE tool_call_id = %s", (call_id,)).fetchone()["n"]
        == 0
    )
    confirm = page.locator('[data-testid="app-form"][data-form="confirm"]')
    confirm.locator('[data-field="confirm"]').check()
    confirm.locator('[data-testid="answer"]').click()
    eventually(lambda: page.locator('[data-testid="app-form"]').count() == 0)
    (row,) = db.execute("SELECT payload FROM outbox WHERE tool_call_id = %s", (call_id,)).fetchall()
    assert row["payload"]["result"]["answers"] == {"name": {"name": "Ada"}, "confirm": {"confirm": True}}

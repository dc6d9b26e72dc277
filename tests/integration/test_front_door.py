"""``GET /``: a small page naming the Web Host, the console, the API document and the MCP endpoint,
and what each needs to sign in — with no token on it."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from typing import Any

from litestar.testing import AsyncTestClient

from service.app import create_app
from service.manifests import Registry
from tests.conftest import AGENT_TOKEN, HOST_TOKEN, OPERATOR_TOKEN, make_settings

Client = AsyncTestClient[Any]


class Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.hrefs.extend(value for name, value in attrs if name == "href" and value)


async def test_the_front_door_names_every_face_and_how_to_sign_in(client: Client) -> None:
    page = await client.get("/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert "default-src 'none'" in page.headers["content-security-policy"]
    text = page.text
    assert '<html lang="en">' in text and "<title>Lineup Runtime</title>" in text
    links = Links()
    links.feed(text)
    for href in ("/host/", "/ops/", "/schema/openapi.json"):
        assert href in links.hrefs, href
    assert "/mcp" in text
    for needed in ("HOST_TOKEN", "OPERATOR_TOKEN", "AGENT_TOKEN", "API_DOCS_UI=true"):
        assert needed in text, needed
    for token in (AGENT_TOKEN, HOST_TOKEN, OPERATOR_TOKEN):
        assert token not in text
    # Every page it links to answers (a sign-in page, the document, a probe), none a 404.
    for href in links.hrefs:
        assert (await client.get(href)).status_code in (200, 503), href
    assert not re.search(r"/schema/swagger\"", text)


async def test_the_front_door_links_the_swagger_page_when_it_is_turned_on(
    database_url: str, registry: Registry
) -> None:
    app = create_app(make_settings(database_url, api_docs_ui=True), registry, sweeper=False)
    async with AsyncTestClient(app=app) as with_ui:
        page = await with_ui.get("/")
        assert '<a href="/schema/swagger">' in page.text
        assert (await with_ui.get("/schema/swagger")).status_code == 200

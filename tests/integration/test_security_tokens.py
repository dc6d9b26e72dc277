"""Every protected endpoint refuses a missing, wrong or other-audience token, and each audience may
hold several tokens for rotation. Routes are read from the application itself, so a new endpoint
is covered the day it is added."""

from __future__ import annotations

import re
import uuid
from typing import Any

import httpx
import pytest
from litestar import Litestar
from litestar.routes import HTTPRoute
from litestar.testing import AsyncTestClient

from service.app import create_app
from service.manifests import Registry
from tests.conftest import AGENT, HOST, OPERATOR, make_settings

Client = AsyncTestClient[Any]

AUDIENCE_BY_PREFIX = [
    ("/v1/tools", "agent"),
    ("/v1/tool-calls", "agent"),
    ("/v1/operations", "agent"),
    ("/v1/host", "host"),
    ("/v1/ops", "operator"),
    ("/v1/sdk", "capability"),
]
PUBLIC = {"/healthz", "/readyz"}
HEADERS = {"agent": AGENT, "host": HOST, "operator": OPERATOR}


def audience(path: str) -> str | None:
    for prefix, name in AUDIENCE_BY_PREFIX:
        if path.startswith(prefix):
            return name
    return None


def protected_routes(app: Litestar) -> list[tuple[str, str, str]]:
    found: list[tuple[str, str, str]] = []
    for route in app.routes:
        if not isinstance(route, HTTPRoute):
            continue
        path = re.sub(r"\{([a-z_]+)(:[a-z]+)?\}", lambda m: str(uuid.uuid4()), route.path)
        name = audience(route.path)
        for method in sorted(route.methods - {"OPTIONS", "HEAD"}):
            if name is not None:
                found.append((method, path, name))
    return found


def test_every_v1_route_belongs_to_an_audience(settings: Any, registry: Registry) -> None:
    app = create_app(settings, registry, sweeper=False)
    for route in app.routes:
        if isinstance(route, HTTPRoute) and route.path.startswith("/v1"):
            assert audience(route.path) is not None, route.path


async def test_every_protected_route_refuses_missing_wrong_and_other_audience_tokens(
    settings: Any, registry: Registry
) -> None:
    app = create_app(settings, registry, sweeper=False)
    routes = protected_routes(app)
    assert len(routes) >= 15
    async with AsyncTestClient(app=app) as client:
        for method, path, owner in routes:
            attempts: dict[str, dict[str, str]] = {
                "missing": {},
                "wrong": {"Authorization": "Bearer definitely-not-a-token-0000"},
                "malformed": {"Authorization": "Bearer"},
                **{f"{other}-token": headers for other, headers in HEADERS.items() if other != owner},
            }
            for label, headers in attempts.items():
                response = await client.request(method, path, headers=headers, json={})
                assert response.status_code == 401, (method, path, label, response.status_code, response.text)
                assert response.json()["error"] == "unauthorized"


@pytest.mark.parametrize("which", [0, 1])
async def test_each_of_several_rotated_tokens_is_accepted(
    database_url: str, registry: Registry, which: int
) -> None:
    tokens = ["first-agent-token-000001", "second-agent-token-00002"]
    settings = make_settings(database_url, agent_token=" ".join(tokens))
    app = create_app(settings, registry, sweeper=False)
    async with AsyncTestClient(app=app) as client:
        ok = await client.get("/v1/tools", headers={"Authorization": f"Bearer {tokens[which]}"})
        assert ok.status_code == 200
        retired = await client.get("/v1/tools", headers=AGENT)
        assert retired.status_code == 401


async def test_request_bodies_over_the_limit_are_413_on_every_api(client: Client) -> None:
    big = {"padding": "x" * 100_000}
    for path, headers in [
        ("/v1/tool-calls", AGENT),
        ("/v1/host/conversations/c/messages", HOST),
        ("/v1/host/conversations/c/workspace/foreground", HOST),
    ]:
        response = await client.post(path, json=big, headers=headers)
        assert response.status_code == 413, (path, response.text)
        assert response.json()["error"] == "request_too_large"


def test_public_endpoints_need_no_token(settings: Any, registry: Registry) -> None:
    app = create_app(settings, registry, sweeper=False)
    paths = {route.path for route in app.routes if isinstance(route, HTTPRoute)}
    assert paths >= PUBLIC


@pytest.mark.parametrize(
    ("path", "needs"),
    [
        ("/v1/tools", "AGENT_TOKEN"),
        ("/v1/host/conversations/c/workspace", "HOST_TOKEN or a person's session"),
        ("/v1/ops/stats", "OPERATOR_TOKEN"),
        ("/v1/sdk/context", "an instance capability"),
        ("/mcp", "AGENT_TOKEN"),
    ],
)
async def test_a_401_says_which_credential_is_wanted_and_what_is_wrong_with_the_one_sent(
    client: Client, path: str, needs: str
) -> None:
    other = HOST if "AGENT" in needs else AGENT
    answers = {
        "none": await client.get(path),
        "not bearer": await client.get(path, headers={"Authorization": other["Authorization"].split()[1]}),
        "another audience's": await client.get(path, headers=other),
    }
    messages = {}
    for what, answer in answers.items():
        assert answer.status_code == 401, (what, answer.text)
        assert answer.json()["error"] == "unauthorized"
        messages[what] = answer.json()["message"]
        assert needs in messages[what], (what, messages[what])
    assert messages["none"].startswith("no credentials")
    assert messages["not bearer"].startswith('the Authorization header must read "Bearer <token>"')
    assert messages["another audience's"].startswith("this token is not accepted here")


METRICS_TOKEN = "metrics-token-for-tests-1"


async def test_metrics_need_the_metrics_or_the_operator_token_unless_made_public(
    database_url: str, registry: Registry
) -> None:
    # The third security review: /metrics (backlog, dead rows, pause and circuit state) answered
    # anyone who reached the public port.
    app = create_app(make_settings(database_url, metrics_token=METRICS_TOKEN), registry, sweeper=False)
    async with AsyncTestClient(app=app) as client:
        for headers in ({}, AGENT, HOST, {"Authorization": "Bearer not-a-real-token-1234"}):
            refused = await client.get("/metrics", headers=headers)
            assert refused.status_code == 401, headers
            assert refused.json()["error"] == "unauthorized"
            assert "METRICS_TOKEN or OPERATOR_TOKEN" in refused.json()["message"]
            assert "lineup_" not in refused.text
        for headers in ({"Authorization": f"Bearer {METRICS_TOKEN}"}, OPERATOR):
            scraped = await client.get("/metrics", headers=headers)
            assert scraped.status_code == 200 and "lineup_" in scraped.text
    public = create_app(make_settings(database_url, metrics_public=True), registry, sweeper=False)
    async with AsyncTestClient(app=public) as client:
        assert (await client.get("/metrics")).status_code == 200
    closed = create_app(make_settings(database_url, metrics_public=False), registry, sweeper=False)
    async with AsyncTestClient(app=closed) as client:
        assert (await client.get("/metrics")).status_code == 401
        assert (await client.get("/metrics", headers=OPERATOR)).status_code == 200


async def test_metrics_answer_private_network_peers_without_a_token_until_one_is_set(
    database_url: str, registry: Registry
) -> None:
    # The contract's probe: GET /metrics, as a Prometheus beside the service scrapes it with no
    # credentials. A peer on the public internet needs a token even by default (the third security
    # review: the page shows the backlog, dead rows, pause and circuit state). The scraper asks for
    # http://service/metrics, as Compose's Prometheus does (its Host named in ALLOWED_HOSTS).
    app = create_app(make_settings(database_url, allowed_hosts="service"), registry, sweeper=False)
    asgi: Any = app  # httpx types its ASGI app more narrowly than Litestar's __call__
    async with AsyncTestClient(app=app):  # runs the lifespan; the requests below name their peer
        for peer in (
            "127.0.0.1",
            "10.1.2.3",
            "172.20.0.5",
            "192.168.1.9",
            "::1",
            "fd00::7",
            "::ffff:10.0.0.1",
        ):
            async with httpx.AsyncClient(
                transport=httpx.ASGITransport(app=asgi, client=(peer, 40000)), base_url="http://service"
            ) as client:
                scraped = await client.get("/metrics")
            assert scraped.status_code == 200 and "lineup_" in scraped.text, peer
        for peer in ("8.8.8.8", "203.0.113.7", "2001:4860::8888", "::ffff:8.8.4.4", "testclient"):
            async with httpx.AsyncClient(
                transport=httpx.ASGITransport(app=asgi, client=(peer, 40000)), base_url="http://service"
            ) as client:
                refused = await client.get("/metrics")
                scraped = await client.get("/metrics", headers=OPERATOR)
            assert refused.status_code == 401 and "lineup_" not in refused.text, peer
            assert scraped.status_code == 200 and "lineup_" in scraped.text, peer

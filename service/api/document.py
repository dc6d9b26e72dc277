"""How Litestar documents the API: security schemes, tags, and where its defaults are not ours.

Everything else in the document comes from the handlers themselves: their body models
(``service.api.bodies``), their answer types and declared refusals (``service.api.answers``), and
their parameters (``service.api.inputs``).
"""

from __future__ import annotations

from litestar import Litestar
from litestar.openapi import OpenAPIConfig
from litestar.openapi.spec import Components, Operation, SecurityScheme

from service.api.console_session import COOKIE_NAME as CONSOLE_COOKIE_NAME
from service.api.host_session import COOKIE_NAME

SECURITY_SCHEMES = {
    "agent": SecurityScheme(type="http", scheme="bearer", description="AGENT_TOKEN: the Agent Tool API."),
    "host": SecurityScheme(type="http", scheme="bearer", description="HOST_TOKEN: the Host API."),
    "hostSession": SecurityScheme(
        type="apiKey",
        name=COOKIE_NAME,
        security_scheme_in="cookie",
        description="The Web Host page's session cookie, in place of HOST_TOKEN on /v1/host/ "
        "(unsafe methods also need Content-Type: application/json).",
    ),
    "operator": SecurityScheme(type="http", scheme="bearer", description="OPERATOR_TOKEN: the ops API."),
    "operatorSession": SecurityScheme(
        type="apiKey",
        name=CONSOLE_COOKIE_NAME,
        security_scheme_in="cookie",
        description="The operator console's session cookie, in place of OPERATOR_TOKEN on /v1/ops/ "
        "(unsafe methods also need Sec-Fetch-Site: same-origin and Content-Type: application/json).",
    ),
    "capability": SecurityScheme(
        type="http",
        scheme="bearer",
        description="An instance capability (POST /v1/host/instances/{instance_id}/capability): the SDK API.",
    ),
}

# Litestar documents a 400 "Validation Exception" for every route with a parameter. This service
# never answers one: parameters are checked by service.api.inputs, bodies by
# service.api.bodies.ContractRequest, each with the contract's error body.
_LITESTAR_VALIDATION = "Bad request syntax or unsupported method"


def openapi_config() -> OpenAPIConfig:
    return OpenAPIConfig(
        title="Lineup Runtime",
        version="0.1.0",
        path="/schema",
        components=Components(security_schemes=dict(SECURITY_SCHEMES)),
        create_examples=False,
    )


def without_litestar_validation_answers(app: Litestar) -> None:
    """Drop the 400 Litestar documents by default on every operation that has parameters."""
    for item in (app.openapi_schema.paths or {}).values():
        for method in ("get", "put", "post", "delete", "patch"):
            operation: Operation | None = getattr(item, method)
            responses = operation.responses if operation is not None else None
            default = (responses or {}).get("400")
            if responses is not None and getattr(default, "description", None) == _LITESTAR_VALIDATION:
                del responses["400"]

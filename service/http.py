"""What both faces over HTTP — the REST API (``service.api``) and MCP (``service.mcp``) — say alike:
the one table from a kind of answer to its HTTP status, the error codes of refusals nobody worded,
the headers every API answer carries, and the bearer tokens each audience presents.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable, Mapping

from litestar.connection import ASGIConnection

from service.domain.errors import (
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    Malformed,
    Misdirected,
    NotFound,
    Refusal,
    TooLarge,
    TooMany,
    Unauthenticated,
    Unavailable,
)
from service.domain.outcomes import Accepted, Answered

# The one place where a kind of answer — a refusal, or a tool call's outcome — becomes an HTTP status.
# MCP reports the same status beside a tool's result, and its isError is "this is a 4xx".
STATUS_OF_KIND: dict[type, int] = {
    Answered: 200,
    Accepted: 202,
    Malformed: 400,
    Unauthenticated: 401,
    Forbidden: 403,
    NotFound: 404,
    Conflict: 409,
    Gone: 410,
    TooLarge: 413,
    Misdirected: 421,
    Invalid: 422,
    TooMany: 429,
    Unavailable: 503,
}


def status_of_kind(kind: type) -> int:
    for ancestor in kind.__mro__:
        if ancestor in STATUS_OF_KIND:
            return STATUS_OF_KIND[ancestor]
    raise TypeError(f"{kind.__name__} is no kind of answer with a status")


def status_of(refusal: Refusal) -> int:
    return status_of_kind(type(refusal))


def outcome_statuses(kinds: Mapping[str, type]) -> dict[str, int]:
    """The status of every outcome word (a Tool's answer, as ``tool_calls.outcome`` records it), from
    its kind (``Registry.kinds``): what the operators' reads of recorded calls show."""
    return {outcome: status_of_kind(kind) for outcome, kind in kinds.items()}


_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    413: "request_too_large",
    415: "unsupported_media_type",
    421: "misdirected_request",
    422: "invalid_request",
    429: "too_many_requests",
    503: "unavailable",
}


def error_code(status: int) -> str:
    """The code of an HTTP refusal that no handler worded (a wrong method, a wrong media type)."""
    return _CODES.get(status, "error")


# What every API answer carries, error answers included (Litestar's exception handling does not add
# the app's default response headers to them).
API_HEADERS = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


class TokenBook:
    """The accepted tokens of each audience, kept as digests; several per audience for rotation."""

    def __init__(self, tokens: dict[str, Iterable[str]]) -> None:
        self._digests = {audience: [_digest(t) for t in values] for audience, values in tokens.items()}

    def accepts(self, audience: str, token: str) -> bool:
        presented = _digest(token)
        accepted = False
        # Compare against every token of the audience: the time taken says nothing about which.
        for digest in self._digests.get(audience, []):
            accepted |= hmac.compare_digest(presented, digest)
        return accepted


#: What each audience's endpoints take, as a refusal names it.
NEEDS = {
    "agent": "AGENT_TOKEN",
    "mcp": "AGENT_TOKEN or a person's access token (WWW-Authenticate names its authorization server)",
    "host": "HOST_TOKEN or a person's session",
    "operator": "OPERATOR_TOKEN (or the console's sign-in)",
    "capability": "an instance capability",
    "metrics": "METRICS_TOKEN or OPERATOR_TOKEN",
}


def refused(connection: ASGIConnection, audience: str) -> Unauthenticated:  # type: ignore[type-arg]
    """The 401 of a request without an accepted credential, saying what is wrong with it: none
    sent, a header that is not ``Bearer <token>``, or a token this API does not take (whether it
    is another audience's or no one's, it does not say)."""
    return Unauthenticated(unauthorized_message(connection.headers.get("authorization"), audience))


def unauthorized_message(header: str | None, audience: str) -> str:
    needs = NEEDS[audience]
    if not header:
        return f"no credentials: send Authorization: Bearer <{needs}>"
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return f'the Authorization header must read "Bearer <token>"; this API takes {needs}'
    return f"this token is not accepted here: this API takes {needs}"


def authorization_header(connection: ASGIConnection) -> str | None:  # type: ignore[type-arg]
    """The first ``Authorization`` header, as ``connection.headers.get`` reads it (latin-1), from the
    scope's raw list: no header mapping is built for the request (on every call's path)."""
    for name, value in connection.scope["headers"]:
        if len(name) == 13 and name.lower() == b"authorization":  # no other name is lowered
            return value.decode("latin-1")
    return None


def bearer_token(connection: ASGIConnection) -> str | None:  # type: ignore[type-arg]
    header = authorization_header(connection)
    if not header:
        return None
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()

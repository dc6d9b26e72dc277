"""Bearer tokens per audience, compared in constant time."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Iterable

from litestar.connection import ASGIConnection
from litestar.handlers.base import BaseRouteHandler

from service.domain.errors import unauthorized

Guard = Callable[[ASGIConnection, BaseRouteHandler], None]  # type: ignore[type-arg]


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


def bearer_token(connection: ASGIConnection) -> str | None:  # type: ignore[type-arg]
    header = connection.headers.get("authorization")
    if not header:
        return None
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def require(audience: str) -> Guard:
    def guard(connection: ASGIConnection, _: BaseRouteHandler) -> None:  # type: ignore[type-arg]
        book: TokenBook = connection.app.state.tokens
        token = bearer_token(connection)
        if token is None or not book.accepts(audience, token):
            raise unauthorized()

    guard.__name__ = f"require_{audience}"
    return guard

"""SDK capabilities: random bearer tokens bound to one app instance, stored only as digests."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from uuid import UUID

from service.db import capabilities as caps_db
from service.domain.errors import not_found
from service.use_cases.runtime import Runtime


@dataclass(frozen=True)
class Capability:
    """What a presented token is bound to; an SDK request can never name any of it."""

    instance_id: UUID
    app_scope: str
    conversation_id: str


def token_digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


async def mint_capability(rt: Runtime, instance_id: UUID) -> dict[str, str]:
    """A new token for the instance; closed instances get one too, to show their history."""
    token = secrets.token_urlsafe(32)
    async with rt.transaction() as conn:
        if not await caps_db.mint(conn, token_digest(token), instance_id):
            raise not_found("instance")
    return {"capability": token}


async def resolve_capability(rt: Runtime, token: str) -> Capability | None:
    async with rt.transaction() as conn:
        row = await caps_db.lookup(conn, token_digest(token))
    if row is None:
        return None
    return Capability(row["instance_id"], row["app_scope"], row["conversation_id"])

"""SDK capabilities: random bearer tokens bound to one app instance, stored only as digests.

One minted under a person's session lives as long as that session (and at most as long as its
instance's history is kept); a session mints at most a bounded number. One minted with HOST_TOKEN
itself lives as long as its instance's history.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from uuid import UUID

from service.db import capabilities as caps_db
from service.db import workspaces as ws_db
from service.domain.errors import TooMany, not_found, unauthorized
from service.use_cases.runtime import Runtime


@dataclass(frozen=True)
class Capability:
    """What a presented token is bound to; an SDK request can never name any of it."""

    instance_id: UUID
    app_scope: str
    conversation_id: str


def token_digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


async def mint_capability(
    rt: Runtime, instance_id: UUID, host_session_id: UUID | None = None
) -> dict[str, str]:
    """A new token for the instance, minted under a person's session (None: HOST_TOKEN); closed
    instances get one too, to show their history."""
    token = secrets.token_urlsafe(32)
    limit = rt.settings.capabilities_per_session
    async with rt.unit_of_work(transaction=False) as work:
        conversation_id = await ws_db.conversation_of_instance(work.conn, instance_id)
    if conversation_id is None:
        raise not_found("instance")
    async with rt.unit_of_work() as work:
        conn = work.conn
        if host_session_id is not None:
            minted = await caps_db.minted_under_session(conn, host_session_id)
            if minted is None:
                raise unauthorized()  # ended since the request was let in
            if minted >= limit:
                raise TooMany(f"at most {limit} capabilities may be minted per session; sign in again")
        if not await caps_db.mint(conn, token_digest(token), instance_id, conversation_id, host_session_id):
            raise not_found("instance")
    return {"capability": token}


async def resolve_capability(rt: Runtime, token: str) -> Capability | None:
    async with rt.unit_of_work() as work:
        conn = work.conn
        row = await caps_db.lookup(conn, token_digest(token))
    if row is None:
        return None
    return Capability(row["instance_id"], row["app_scope"], row["conversation_id"])

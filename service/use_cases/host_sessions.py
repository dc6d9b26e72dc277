"""Who calls the Host API, and which conversations they reach.

``HOST_TOKEN`` is the credential of a trusted Host backend and reaches every conversation. For a
person, that backend mints a session: a row in ``host_sessions`` naming the subject, the
conversations and the expiry, and a token that is the session's id signed with its own secret
(``HOST_SESSION_SECRET``, never derived from ``HOST_TOKEN``). Every use of a token reads its row,
so revoking or letting a session expire ends it on every replica at once.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from itsdangerous import BadSignature, URLSafeSerializer

from service.db import host_sessions as sessions_db
from service.domain.errors import SessionsDisabled
from service.use_cases.runtime import Runtime

DEFAULT_TTL_SECONDS = 3600
# What HOST_TOKEN itself signs in for, where a deployment allows it (HOST_TOKEN_SIGN_IN).
SIGNED_IN_WITH_HOST_TOKEN = "signed in with HOST_TOKEN"  # noqa: S105 - a subject label, not a secret
HOST_TOKEN_SESSION_SECONDS = 12 * 3600


@dataclass(frozen=True)
class HostPrincipal:
    """The backend (``session_id`` None) or one person's session."""

    session_id: UUID | None
    subject: str | None
    #: None: every conversation.
    conversation_ids: frozenset[str] | None
    #: A session's end (RFC 3339), and the seconds left to it by the database clock when read.
    expires_at: str | None = None
    expires_in: float | None = None

    @property
    def is_backend(self) -> bool:
        return self.session_id is None

    def reaches(self, conversation_id: str) -> bool:
        return self.conversation_ids is None or conversation_id in self.conversation_ids


BACKEND = HostPrincipal(None, None, None)


class SessionTokens:
    """Signs a session's id into its token, and reads it back; any tampering reads as nothing."""

    def __init__(self, secret: str | None) -> None:
        self._serializer = URLSafeSerializer(secret, salt="lineup-host-session") if secret else None

    @property
    def enabled(self) -> bool:
        return self._serializer is not None

    def token(self, session_id: UUID) -> str:
        if self._serializer is None:
            raise SessionsDisabled("host sessions are not configured: set HOST_SESSION_SECRET")
        return str(self._serializer.dumps(str(session_id)))

    def session_id(self, token: str) -> UUID | None:
        if self._serializer is None or len(token) > 512:
            return None
        try:
            return UUID(str(self._serializer.loads(token)))
        except (BadSignature, ValueError):
            return None


async def mint(
    rt: Runtime,
    tokens: SessionTokens,
    subject: str,
    conversation_ids: list[str] | None,
    ttl_seconds: int = DEFAULT_TTL_SECONDS,
) -> dict[str, Any]:
    """A new session for one person; ``conversation_ids`` None reaches every conversation."""
    session_id = uuid.uuid4()
    token = tokens.token(session_id)  # refuses before writing anything when sessions are off
    distinct = None if conversation_ids is None else list(dict.fromkeys(conversation_ids))
    async with rt.unit_of_work() as work:
        conn = work.conn
        row = await sessions_db.create(
            conn, session_id=session_id, subject=subject, conversation_ids=distinct, ttl_seconds=ttl_seconds
        )
    return {
        "session_id": str(row["session_id"]),
        "session": token,
        "subject": row["subject"],
        "conversation_ids": row["conversation_ids"],
        "expires_at": row["expires_at"],
    }


async def resolve(rt: Runtime, tokens: SessionTokens, token: str) -> HostPrincipal | None:
    """The person a session token stands for; None when it is forged, revoked or expired."""
    session_id = tokens.session_id(token)
    if session_id is None:
        return None
    async with rt.pool.connection() as conn:
        row = await sessions_db.active(conn, session_id)
    if row is None:
        return None
    ids = row["conversation_ids"]
    return HostPrincipal(
        row["session_id"],
        row["subject"],
        None if ids is None else frozenset(ids),
        row["expires_at"],
        row["expires_in"],
    )


async def revoke(rt: Runtime, session_id: UUID) -> bool:
    """End a session now (idempotent); False for an unknown one."""
    async with rt.pool.connection() as conn:
        return await sessions_db.revoke(conn, session_id)

"""The operator console's session cookie: a signed, timestamped value naming a server-side session.

Signed with itsdangerous (HMAC-SHA256) under the OPERATOR token the operator signed in with, and
checked against every token ``OPERATOR_TOKEN`` holds now, so retiring a token ends the sessions it
opened; what it names is a row of ``console_sessions`` (``service.use_cases.console_sessions``),
so signing out — or the expiry — ends it on every replica, whoever kept a copy of the cookie. It
stands for that token on ``/v1/ops/*`` only (``service.web.console_access``), with the Web Host's rules:
HttpOnly, SameSite=Strict, and writes only from the console's own origin with a JSON body.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from collections.abc import Callable, Iterable
from uuid import UUID

from itsdangerous import BadSignature, TimestampSigner, URLSafeTimedSerializer

PLAIN_COOKIE_NAME = "lineup_ops_session"
#: With COOKIE_SECURE (the default): Secure, and the __Host- prefix (no Domain, Path=/).
SECURE_COOKIE_NAME = "__Host-lineup_ops_session"
#: The name over plain http (COOKIE_SECURE=false, as in dev and the tests).
COOKIE_NAME = PLAIN_COOKIE_NAME


def cookie_name(secure: bool) -> str:
    return SECURE_COOKIE_NAME if secure else PLAIN_COOKIE_NAME


LIFETIME_SECONDS = 12 * 60 * 60
MAX_COOKIE_LENGTH = 300
_SALT = "lineup-runtime operator console session v1"


class ConsoleSessions:
    """Signs a session's id into a cookie value and reads it back; ``issue`` only ever sees a token
    the TokenBook accepted. Whether the session is still open is the database's to say."""

    def __init__(
        self,
        operator_tokens: Iterable[str],
        lifetime_seconds: int = LIFETIME_SECONDS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.lifetime_seconds = lifetime_seconds

        class Signer(TimestampSigner):
            def get_timestamp(self) -> int:
                return int(clock())

        def serializer(keys: list[str]) -> URLSafeTimedSerializer:
            options = {"digest_method": hashlib.sha256}
            return URLSafeTimedSerializer(keys, salt=_SALT, signer=Signer, signer_kwargs=options)

        tokens = list(operator_tokens)
        self._issuers = {token: serializer([token]) for token in tokens}
        self._checker = serializer(tokens) if tokens else None

    def issue(self, accepted_token: str, session_id: UUID | None = None) -> str:
        return str(self._issuers[accepted_token].dumps({"session_id": str(session_id or uuid.uuid4())}))

    def session_id(self, value: str | None) -> UUID | None:
        """The session a cookie value names, if it is signed under a configured token and young
        enough; None otherwise."""
        if self._checker is None or not value or len(value) > MAX_COOKIE_LENGTH or not value.isascii():
            return None
        try:
            payload = self._checker.loads(value, max_age=self.lifetime_seconds)
            return UUID(str(payload["session_id"]))
        except (BadSignature, KeyError, TypeError, ValueError):
            return None

    def valid(self, value: str | None) -> bool:
        return self.session_id(value) is not None

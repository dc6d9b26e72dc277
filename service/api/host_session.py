"""The Web Host's session cookie: a stateless, HMAC-signed expiry, no server-side store.

The signing key is derived from the HOST token the person signed in with, so every replica that
accepts that token accepts the cookie, and retiring a token from ``HOST_TOKEN`` ends its sessions.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from collections.abc import Iterable

COOKIE_NAME = "lineup_host_session"
LIFETIME_SECONDS = 12 * 60 * 60
_CONTEXT = b"lineup-runtime web host session v1"
_VERSION = "v1"


def _derive(token: str) -> bytes:
    return hmac.new(token.encode("utf-8", "surrogatepass"), _CONTEXT, hashlib.sha256).digest()


def _mac(key: bytes, payload: str) -> str:
    digest = hmac.new(key, payload.encode("ascii"), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


class HostSessions:
    """Issues and checks session values; ``issue`` only ever sees a token TokenBook accepted."""

    def __init__(self, host_tokens: Iterable[str], lifetime_seconds: int = LIFETIME_SECONDS) -> None:
        self._keys = [_derive(token) for token in host_tokens]
        self.lifetime_seconds = lifetime_seconds

    def issue(self, accepted_token: str, now: float | None = None) -> str:
        expires = int(now if now is not None else time.time()) + self.lifetime_seconds
        payload = f"{_VERSION}.{expires}.{secrets.token_urlsafe(12)}"
        return f"{payload}.{_mac(_derive(accepted_token), payload)}"

    def valid(self, value: str | None, now: float | None = None) -> bool:
        if not value or len(value) > 200 or not value.isascii():
            return False
        payload, _, mac = value.rpartition(".")
        version, _, rest = payload.partition(".")
        expires, _, _nonce = rest.partition(".")
        if version != _VERSION or not expires.isdigit():
            return False
        matched = False
        # Check every key: the time taken says nothing about which token signed.
        for key in self._keys:
            matched |= hmac.compare_digest(_mac(key, payload), mac)
        return matched and int(expires) > (now if now is not None else time.time())

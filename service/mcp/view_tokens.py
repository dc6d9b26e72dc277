"""The MCP App View's binding: a token the server mints for one call's conversation and operation.

A host hands the View the result of the ``pomodoro.start`` call it renders beside
(``ui/notifications/tool-result``), and forwards the View's app-only ``tools/call`` with its own
credentials. What the View sends back is untrusted, so it may not choose the operation: the
result's ``_meta["io.lineup/view_token"]`` carries

    v1.<operation_id>.<base64url HMAC-SHA256 of "v1", the call's conversation and that operation>

and an app-only call hands it back (``arguments.view_token``). The server reads the operation the
token names and checks the MAC against the row's own conversation before it acts, so a token opens
exactly the operation of the call it came with, in that call's conversation: another operation's
id, another conversation's token, an edited or truncated one open nothing.

The key is the same on every replica and across restarts: ``MCP_APP_SECRET`` (several, separated by
spaces, while one rotates: the first signs, each verifies), or, unset, one derived from
``HOST_SESSION_SECRET`` (a separate key: a View token is never a session token). The token is
deterministic, so a replayed call answers the same one. With neither set, no token is minted and the
app-only tools answer ``mcp_apps_disabled``.
"""

from __future__ import annotations

import base64
import hmac
import uuid
from collections.abc import Sequence

from service.settings import Settings, split_tokens

#: Where a ``pomodoro.start`` result (and its task's) carries the View's token, in ``_meta``.
VIEW_TOKEN = "io.lineup/view_token"  # noqa: S105 - a _meta key, not a secret
_VERSION = "v1"
_KEY_LABEL = b"lineup mcp-app view token key"
_MAC_CHARACTERS = 43  # 32 bytes, unpadded base64url
_UUID_CHARACTERS = 36


class ViewTokens:
    """Mints and checks View tokens with the deployment's keys (none: disabled)."""

    def __init__(self, secrets: Sequence[str]) -> None:
        # Keyed once: each MAC is a copy of its key's HMAC, a third of the cost of hmac.digest.
        self._keys = [
            hmac.new(hmac.digest(secret.encode(), _KEY_LABEL, "sha256"), digestmod="sha256")
            for secret in secrets
        ]

    @classmethod
    def from_settings(cls, settings: Settings) -> ViewTokens:
        secrets = split_tokens(settings.mcp_app_secret)
        if not secrets and settings.host_session_secret:
            secrets = (settings.host_session_secret,)
        return cls(secrets)

    @property
    def enabled(self) -> bool:
        return bool(self._keys)

    @staticmethod
    def _mac(key: hmac.HMAC, conversation_id: str, operation_id: str) -> str:
        mac = key.copy()
        mac.update(f"{_VERSION}\0{conversation_id}\0{operation_id}".encode())
        return base64.urlsafe_b64encode(mac.digest()).rstrip(b"=").decode()

    def mint(self, conversation_id: str, operation_id: str) -> str | None:
        """The token of ``operation_id`` seen from ``conversation_id``; None when disabled."""
        if not self._keys:
            return None
        return f"{_VERSION}.{operation_id}.{self._mac(self._keys[0], conversation_id, operation_id)}"

    @staticmethod
    def operation_of(token: str) -> uuid.UUID | None:
        """The operation a token names, if it has a token's shape (not yet whether it verifies)."""
        version, _, rest = token.partition(".")
        operation, _, mac = rest.partition(".")
        if version != _VERSION or len(operation) != _UUID_CHARACTERS or len(mac) != _MAC_CHARACTERS:
            return None
        try:
            parsed = uuid.UUID(operation)
        except ValueError:
            return None
        return parsed if str(parsed) == operation else None

    def verifies(self, token: str, conversation_id: str) -> bool:
        """Whether ``token`` was minted here for its operation in ``conversation_id``."""
        _, _, rest = token.partition(".")
        operation, _, mac = rest.partition(".")
        # The text is compared, not the bytes it decodes to: one token, one spelling.
        return any(
            hmac.compare_digest(mac.encode(), self._mac(key, conversation_id, operation).encode())
            for key in self._keys
        )

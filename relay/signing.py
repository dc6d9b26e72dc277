"""Standard Webhooks headers: every configured secret signs, so a rotation never drops a delivery.

The signature is the one ``standardwebhooks.Webhook.sign`` makes — HMAC-SHA256 over
``{webhook-id}.{webhook-timestamp}.{body}`` with the secret's base64-decoded bytes, ``v1,`` and the
digest in base64 — computed from an HMAC keyed once per secret and copied per delivery (the
library keys a new one per call). The tests verify the relay's deliveries with the library.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import math
from collections.abc import Sequence
from datetime import datetime

_PREFIX = "whsec_"


def secret_key(secret: str) -> bytes:
    """A ``whsec_<base64>`` secret's key bytes, decoded as ``standardwebhooks.Webhook`` decodes it."""
    encoded = secret[len(_PREFIX) :] if secret.startswith(_PREFIX) else secret
    key = base64.b64decode(encoded + "==")  # the library pads unpadded base64 the same way
    if not key:
        raise ValueError("a webhook secret may not be empty")
    return key


class Signer:
    def __init__(self, secrets: Sequence[str]) -> None:
        if not secrets:
            raise ValueError("at least one webhook secret is required")
        self._macs = [hmac.new(secret_key(secret), digestmod=hashlib.sha256) for secret in secrets]

    def signature(self, event_id: str, timestamp: int, body: bytes) -> bytes:
        """``webhook-signature``'s value: ``v1,<base64>`` per secret, separated by spaces."""
        signed = b"%s.%d.%s" % (event_id.encode(), timestamp, body)
        signatures = []
        for keyed in self._macs:
            mac = keyed.copy()
            mac.update(signed)
            signatures.append(b"v1," + base64.b64encode(mac.digest()))
        return b" ".join(signatures)

    def header_lines(self, event_id: str, timestamp: int, body: bytes) -> bytes:
        """The three headers as HTTP/1.1 lines, each ending with CRLF."""
        return b"webhook-id: %s\r\nwebhook-timestamp: %d\r\nwebhook-signature: %s\r\n" % (
            event_id.encode("ascii"),
            timestamp,
            self.signature(event_id, timestamp, body),
        )

    def headers(self, event_id: str, body: str | bytes, at: datetime) -> dict[str, str]:
        """``webhook-id`` stays the event id on every attempt; timestamp and signatures are fresh."""
        timestamp = math.floor(at.timestamp())
        data = body.encode() if isinstance(body, str) else body
        return {
            "webhook-id": event_id,
            "webhook-timestamp": str(timestamp),
            "webhook-signature": self.signature(event_id, timestamp, data).decode("ascii"),
        }

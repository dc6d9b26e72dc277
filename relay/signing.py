"""Standard Webhooks headers: every configured secret signs, so a rotation never drops a delivery."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime

from standardwebhooks import Webhook


class Signer:
    def __init__(self, secrets: Sequence[str]) -> None:
        if not secrets:
            raise ValueError("at least one webhook secret is required")
        self._hooks = [Webhook(secret) for secret in secrets]

    def headers(self, event_id: str, body: str, at: datetime) -> dict[str, str]:
        """``webhook-id`` stays the event id on every attempt; timestamp and signatures are fresh."""
        signatures = " ".join(hook.sign(event_id, at, body) for hook in self._hooks)
        return {
            "webhook-id": event_id,
            "webhook-timestamp": str(math.floor(at.timestamp())),
            "webhook-signature": signatures,
        }

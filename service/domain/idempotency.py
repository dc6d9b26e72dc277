"""Tool-call idempotency: which answers are recorded, and how bodies are compared."""

from __future__ import annotations

import hashlib
import json
from typing import Any

# 401, 404 and 422 record nothing: the caller may correct the call and retry under the same id.
UNRECORDED_STATUSES = frozenset({400, 401, 404, 413, 422})


def fingerprint(body: dict[str, Any]) -> str:
    """A digest of the body as a JSON value: key order and whitespace do not matter."""
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def is_recorded(status: int) -> bool:
    return status not in UNRECORDED_STATUSES

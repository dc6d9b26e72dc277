"""Tool-call idempotency: how request bodies are compared.

Answers 400, 401, 404, 413 and 422 are refused before the tool-call statement runs, so they record
nothing (the caller may correct the call and retry under the same id); ``call_tool`` in the
database records every answer it gives.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

# What ``json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)`` builds on every
# call, built once (the same text: json.dumps is this encoder's ``encode``).
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def fingerprint(body: dict[str, Any]) -> str:
    """A digest of the body as a JSON value: key order and whitespace do not matter."""
    canonical = _CANONICAL.encode(body)
    return hashlib.sha256(canonical.encode()).hexdigest()

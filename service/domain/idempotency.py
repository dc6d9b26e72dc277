"""Tool-call idempotency: how request bodies are compared.

Answers 400, 401, 404, 413 and 422 are refused before the tool-call statement runs, so they record
nothing (the caller may correct the call and retry under the same id); ``call_tool`` in the
database records every answer it gives.
"""

from __future__ import annotations

import hashlib
import json
from json import encoder as _json_encoder
from typing import Any

# The text ``json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)`` builds,
# from the C encoder that ``dumps`` itself runs, made once: ``JSONEncoder.iterencode`` builds it (and
# a float formatter, and a dict for the circular check) on every call. No circular check: a body
# decoded from JSON holds no cycles. Where the C encoder is missing, the stdlib's encoder.
_STDLIB = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
_C_ENCODER: Any = getattr(_json_encoder, "c_make_encoder", None)
if _C_ENCODER is not None:
    _ITERENCODE = _C_ENCODER(
        None, _STDLIB.default, _json_encoder.encode_basestring, None, ":", ",", True, False, True
    )

    def canonical_json(body: dict[str, Any]) -> str:
        return "".join(_ITERENCODE(body, 0))

else:  # pragma: no cover - CPython has the C encoder

    def canonical_json(body: dict[str, Any]) -> str:
        return _STDLIB.encode(body)


def fingerprint(body: dict[str, Any]) -> str:
    """A digest of the body as a JSON value: key order and whitespace do not matter."""
    return hashlib.sha256(canonical_json(body).encode()).hexdigest()

"""The relay's signatures are the Standard Webhooks library's, byte for byte, for every secret."""

from __future__ import annotations

import base64
from datetime import UTC, datetime

import pytest
from standardwebhooks import Webhook

from relay.signing import Signer

SECRETS = [
    "whsec_" + base64.b64encode(bytes(range(32))).decode(),
    "whsec_" + base64.b64encode(b"k" * 24).decode().rstrip("="),  # unpadded, as the library accepts
    base64.b64encode(b"no prefix at all").decode(),
]
BODY = '{"event_id": "e-1", "result": {"activity": "caf\u00e9 \u2615", "n": 1}}'


@pytest.mark.parametrize("secret", SECRETS)
def test_each_signature_is_the_one_the_library_makes(secret: str) -> None:
    at = datetime(2026, 12, 3, 7, 30, 15, 999_999, tzinfo=UTC)
    headers = Signer([secret]).headers("e-1", BODY, at)
    assert headers["webhook-signature"] == Webhook(secret).sign("e-1", at, BODY)
    assert headers["webhook-timestamp"] == "1796283015"


def test_the_library_verifies_a_signed_body() -> None:
    headers = Signer(SECRETS).headers("e-4", BODY, datetime.now(UTC))
    for secret in SECRETS:
        Webhook(secret).verify(BODY.encode(), headers)


def test_a_rotation_signs_with_every_secret_in_order() -> None:
    at = datetime.now(UTC)
    signature = Signer(SECRETS).headers("e-2", BODY.encode(), at)["webhook-signature"]
    assert signature.split(" ") == [Webhook(secret).sign("e-2", at, BODY) for secret in SECRETS]


def test_the_header_lines_carry_the_same_values() -> None:
    at = datetime.now(UTC)
    signer = Signer(SECRETS[:2])
    lines = signer.header_lines("e-3", int(at.timestamp()), BODY.encode()).decode("ascii")
    expected = signer.headers("e-3", BODY, at)
    assert lines == "".join(f"{name}: {value}\r\n" for name, value in expected.items())


def test_an_empty_secret_is_refused() -> None:
    with pytest.raises(ValueError, match="empty"):
        Signer(["whsec_"])

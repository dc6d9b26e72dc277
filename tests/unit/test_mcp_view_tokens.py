"""The MCP App View's token (service.mcp.view_tokens): it opens one operation in one conversation,
with the deployment's key, and nothing else."""

from __future__ import annotations

import base64
import hmac
import uuid

import pytest

from service.mcp.view_tokens import ViewTokens
from service.settings import Settings

KEY = "app-secret-Zx9Wv8Ut7Sr6Qp5On4Ml3-kept-long"
OTHER_KEY = "app-secret-Aa1Bb2Cc3Dd4Ee5Ff6Gg7-another"


def test_a_token_verifies_for_its_own_conversation_only() -> None:
    tokens = ViewTokens([KEY])
    operation = str(uuid.uuid4())
    token = tokens.mint("conv-1", operation)
    assert token is not None
    assert ViewTokens.operation_of(token) == uuid.UUID(operation)
    assert tokens.verifies(token, "conv-1")
    assert not tokens.verifies(token, "conv-2")
    # Deterministic: a replayed call answers the same token, on every replica.
    assert ViewTokens([KEY]).mint("conv-1", operation) == token


def test_another_operation_in_a_token_or_an_edited_mac_does_not_verify() -> None:
    tokens = ViewTokens([KEY])
    token = tokens.mint("conv-1", str(uuid.uuid4()))
    assert token is not None
    version, operation, mac = token.split(".")
    moved = f"{version}.{uuid.uuid4()}.{mac}"
    assert ViewTokens.operation_of(moved) is not None and not tokens.verifies(moved, "conv-1")
    for position in range(len(mac)):
        flipped = mac[:position] + ("A" if mac[position] != "A" else "B") + mac[position + 1 :]
        assert not tokens.verifies(f"{version}.{operation}.{flipped}", "conv-1"), position


@pytest.mark.parametrize(
    "token",
    [
        "",
        "v1",
        "v2.00000000-0000-0000-0000-000000000000." + "A" * 43,
        "v1.not-a-uuid." + "A" * 43,
        "v1.00000000-0000-0000-0000-000000000000." + "A" * 42,
        "v1.00000000-0000-0000-0000-000000000000." + "A" * 44,
        "v1.{00000000-0000-0000-0000-000000000000}." + "A" * 43,
        "v1.00000000000000000000000000000000." + "A" * 43,
    ],
)
def test_a_string_not_shaped_as_a_token_names_no_operation(token: str) -> None:
    assert ViewTokens.operation_of(token) is None


def test_a_truncated_token_is_no_token() -> None:
    token = ViewTokens([KEY]).mint("conv-1", str(uuid.uuid4()))
    assert token is not None
    for length in range(len(token)):
        assert ViewTokens.operation_of(token[:length]) is None


def test_a_rotation_verifies_with_every_key_and_signs_with_the_first() -> None:
    operation = str(uuid.uuid4())
    old = ViewTokens([OTHER_KEY]).mint("conv-1", operation)
    rotated = ViewTokens([KEY, OTHER_KEY])
    assert old is not None and rotated.verifies(old, "conv-1")
    assert rotated.mint("conv-1", operation) == ViewTokens([KEY]).mint("conv-1", operation)
    assert not ViewTokens([KEY]).verifies(old, "conv-1")


def test_the_key_comes_from_mcp_app_secret_or_else_from_host_session_secret() -> None:
    operation = str(uuid.uuid4())
    own = ViewTokens.from_settings(Settings(mcp_app_secret=KEY, host_session_secret=OTHER_KEY))
    derived = ViewTokens.from_settings(Settings(host_session_secret=OTHER_KEY))
    assert own.mint("c", operation) == ViewTokens([KEY]).mint("c", operation)
    assert derived.mint("c", operation) == ViewTokens([OTHER_KEY]).mint("c", operation)
    none = ViewTokens.from_settings(Settings())
    assert not none.enabled and none.mint("c", operation) is None
    assert not none.verifies(f"v1.{operation}." + "A" * 43, "c")


def test_the_mac_is_hmac_sha256_of_the_documented_message_under_the_derived_key() -> None:
    operation = str(uuid.uuid4())
    key = hmac.digest(KEY.encode(), b"lineup mcp-app view token key", "sha256")
    mac = hmac.digest(key, f"v1\0conv-1\0{operation}".encode(), "sha256")
    expected = base64.urlsafe_b64encode(mac).rstrip(b"=").decode()
    assert ViewTokens([KEY]).mint("conv-1", operation) == f"v1.{operation}.{expected}"

"""MCP authorization's settings and the person's conversation id (service.mcp.binding, .oauth)."""

from __future__ import annotations

import time

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from service.domain.errors import Unavailable
from service.domain.ids import is_valid_id
from service.mcp.binding import person_conversation_id
from service.mcp.oauth import ResourceServer, metadata_url
from service.settings import SettingsError, load_settings

TOKENS = {
    "database_url": "postgresql://u@localhost/db",
    "agent_token": "agent-7Fq2xLp9Wz",
    "host_token": "host-Kd83mPq0Zt5",
    "operator_token": "operator-Yx4Nc2Rv",
}


def test_authorization_is_off_unless_an_issuer_is_set() -> None:
    settings = load_settings("serve", **TOKENS)
    assert settings.mcp_resource is None and settings.mcp_issuers == ()


def test_the_resource_defaults_to_the_public_origins_mcp() -> None:
    settings = load_settings(
        "serve", **TOKENS, mcp_oauth_issuer="https://id.example", public_origin="https://lineup.example"
    )
    assert settings.mcp_resource == "https://lineup.example/mcp"
    explicit = load_settings(
        "serve", **TOKENS, mcp_oauth_issuer="https://id.example", mcp_resource_url="https://api.example/mcp"
    )
    assert explicit.mcp_resource == "https://api.example/mcp"


def test_an_issuer_without_a_resource_stops_serve() -> None:
    with pytest.raises(SettingsError, match="MCP_RESOURCE_URL"):
        load_settings("serve", **TOKENS, mcp_oauth_issuer="https://id.example")


@pytest.mark.parametrize("bad", ["id.example", "ftp://id.example", "https://id.example/?a=b"])
def test_an_issuer_that_is_no_url_is_refused_naming_the_variable(bad: str) -> None:
    with pytest.raises(SettingsError, match="MCP_OAUTH_ISSUER"):
        load_settings(mcp_oauth_issuer=bad)


def test_allowed_origins_are_origins_and_include_the_public_one() -> None:
    settings = load_settings(
        mcp_allowed_origins="https://App.example, http://localhost:6274",
        public_origin="https://lineup.example",
    )
    assert settings.mcp_origins == {"https://app.example", "http://localhost:6274", "https://lineup.example"}
    with pytest.raises(SettingsError, match="MCP_ALLOWED_ORIGINS"):
        load_settings(mcp_allowed_origins="https://app.example/path")


def test_a_persons_conversation_is_a_valid_id_fixed_by_issuer_and_subject() -> None:
    alice = person_conversation_id("https://id.example", "alice")
    assert is_valid_id(alice) and len(alice) == 50 and alice.startswith("person-")
    assert alice == person_conversation_id("https://id.example", "alice")
    assert alice != person_conversation_id("https://other.example", "alice")
    assert alice != person_conversation_id("https://id.example", "bob")
    # Issuer and subject cannot be shifted into one another.
    assert person_conversation_id("https://id.example/a", "b") != person_conversation_id(
        "https://id.example", "a/b"
    )


def test_the_metadata_url_puts_the_well_known_path_before_the_resources_path() -> None:
    assert (
        metadata_url("https://lineup.example/mcp")
        == "https://lineup.example/.well-known/oauth-protected-resource/mcp"
    )
    assert (
        metadata_url("https://lineup.example")
        == "https://lineup.example/.well-known/oauth-protected-resource"
    )


async def test_an_issuer_whose_keys_cannot_be_fetched_is_unavailable_not_the_tokens_fault() -> None:
    """Nothing listens at the issuer: 503 (retry) on the first token and on the next within the
    refresh interval, never "an unknown key"."""
    issuer = "http://127.0.0.1:1"
    settings = load_settings(mcp_oauth_issuer=issuer, mcp_resource_url="https://lineup.example/mcp")
    server = ResourceServer(settings)
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    claims = {
        "iss": issuer,
        "sub": "alice",
        "aud": "https://lineup.example/mcp",
        "exp": int(time.time()) + 60,
    }
    token = jwt.encode(claims, key, algorithm="RS256", headers={"kid": "k1"})
    try:
        for _ in range(2):
            with pytest.raises(Unavailable, match="could not be fetched"):
                await server.authenticate(token)
    finally:
        await server.close()


def test_a_dev_stack_takes_its_own_origin_under_both_loopback_names_and_no_other() -> None:
    dev = load_settings(public_origin="http://127.0.0.1:8000", lineup_dev_stack=True)
    assert dev.mcp_origins == {"http://127.0.0.1:8000", "http://localhost:8000"}
    named = load_settings(public_origin="http://localhost:8123", lineup_dev_stack=True)
    assert named.mcp_origins == {"http://127.0.0.1:8123", "http://localhost:8123"}
    # Not another port, and outside make dev only the configured origin itself.
    assert "http://localhost:9000" not in dev.mcp_origins
    deployed = load_settings(public_origin="http://127.0.0.1:8000")
    assert deployed.mcp_origins == {"http://127.0.0.1:8000"}
    public = load_settings(public_origin="https://lineup.example", lineup_dev_stack=True)
    assert public.mcp_origins == {"https://lineup.example"}

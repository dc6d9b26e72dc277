"""Hostile bearer tokens on ``/mcp`` refused cheaply and as ``401 invalid_token``, never a 500
(service.mcp.oauth): oversized ones before any hash or parse, every malformed JOSE header, and an
issuer-signed token whose ``sub`` is no string a person's conversation can be made of. The issuer
is a real HTTP server on loopback publishing its metadata and JWKS (``LocalIssuer``)."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import jwt
import pytest

from service.mcp import oauth
from service.mcp.oauth import TOKEN_MAX_CHARS, ResourceServer, TokenRefused
from service.settings import SettingsError, load_settings
from tests.support.jwks import LocalIssuer, local_issuer

RESOURCE = "https://lineup.example/mcp"


@pytest.fixture(scope="module")
def issuer() -> Iterator[LocalIssuer]:
    with local_issuer() as running:
        yield running


@pytest.fixture
async def server(issuer: LocalIssuer) -> AsyncIterator[ResourceServer]:
    resource = ResourceServer(load_settings(mcp_oauth_issuer=issuer.issuer, mcp_resource_url=RESOURCE))
    try:
        yield resource
    finally:
        await resource.close()


def segment(value: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()


def claims(issuer: LocalIssuer, **more: Any) -> dict[str, Any]:
    return {"iss": issuer.issuer, "sub": "alice", "aud": RESOURCE, "exp": int(time.time()) + 60, **more}


async def refused(server: ResourceServer, token: str) -> TokenRefused:
    with pytest.raises(TokenRefused) as caught:
        await server.authenticate(token)
    assert (caught.value.status, caught.value.error) == (401, "invalid_token")
    return caught.value


async def test_a_good_token_of_the_local_issuer_is_taken(server: ResourceServer, issuer: LocalIssuer) -> None:
    person = await server.authenticate(issuer.sign(claims(issuer)))
    assert (person.issuer, person.subject) == (issuer.issuer, "alice")


@pytest.mark.parametrize(
    "header",
    [
        {"alg": "RS256", "kid": 5},
        {"alg": "RS256", "kid": ["k1"]},
        {"alg": "RS256", "kid": None, "crit": "exp"},
        {"alg": "RS256", "crit": ["exp"]},
        {"alg": "RS256", "crit": [5]},
        {"alg": "RS256", "crit": []},
        {"alg": ["RS256"]},
        {"alg": {"a": 1}, "kid": "k"},
        ["not", "an", "object"],
    ],
    ids=str,
)
async def test_every_malformed_jose_header_is_invalid_token(
    server: ResourceServer, issuer: LocalIssuer, header: Any
) -> None:
    await refused(server, f"{segment(header)}.{segment(claims(issuer))}.c2lnbmF0dXJl")


@pytest.mark.parametrize(
    "payload",
    [["a list"], {"iss": ["a", "list"]}, {"iss": {"an": "object"}}, "a string"],
    ids=str,
)
async def test_a_malformed_payload_is_invalid_token(server: ResourceServer, payload: Any) -> None:
    await refused(server, f"{segment({'alg': 'RS256', 'kid': 'k1'})}.{segment(payload)}.c2lnbmF0dXJl")


async def test_a_token_signed_by_the_issuer_with_a_header_the_library_refuses_is_invalid_token(
    server: ResourceServer, issuer: LocalIssuer
) -> None:
    for headers in ({"crit": ["exp"]}, {"crit": "b64"}):
        await refused(server, issuer.sign(claims(issuer), headers=headers))


@pytest.mark.parametrize("subject", ["\ud800", "x\udfff", "", 5, None], ids=repr)
async def test_an_issuer_signed_token_whose_sub_is_no_proper_string_is_invalid_token(
    server: ResourceServer, issuer: LocalIssuer, subject: object
) -> None:
    said = await refused(server, issuer.sign(claims(issuer, sub=subject)))
    assert "sub" in said.description


async def test_a_client_id_that_is_no_proper_string_is_invalid_token(
    server: ResourceServer, issuer: LocalIssuer
) -> None:
    await refused(server, issuer.sign(claims(issuer, client_id="\ud800")))


async def test_an_oversized_token_is_refused_before_it_is_hashed_or_parsed(
    server: ResourceServer, issuer: LocalIssuer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past TOKEN_MAX_CHARS, a token — even a good one — is refused saying so; nothing hashes or
    parses it (both are made to fail loudly here)."""
    padded = issuer.sign(claims(issuer, pad="x" * TOKEN_MAX_CHARS))
    assert len(padded) > TOKEN_MAX_CHARS

    def untouched(*args: object, **kwargs: object) -> None:
        raise AssertionError("an oversized token was hashed or parsed")

    monkeypatch.setattr("service.mcp.oauth.hashlib.sha256", untouched)
    monkeypatch.setattr(jwt, "get_unverified_header", untouched)
    said = await refused(server, padded)
    assert f"longer than {TOKEN_MAX_CHARS}" in said.description
    assert len(issuer.sign(claims(issuer))) < TOKEN_MAX_CHARS // 4  # a usual token is far below


# --- JWKS and token hygiene ---------------------------------------------------------------------


@pytest.mark.parametrize("typ", ["at+jwt", "application/at+jwt", "JWT", None])
async def test_an_access_tokens_typ_is_taken(
    server: ResourceServer, issuer: LocalIssuer, typ: str | None
) -> None:
    headers = {} if typ is None else {"typ": typ}
    assert (await server.authenticate(issuer.sign(claims(issuer), headers=headers))).subject == "alice"


@pytest.mark.parametrize("typ", ["id_token+jwt", "logout+jwt", "secevent+jwt", "dpop+jwt", 5])
async def test_a_jwt_that_says_it_is_no_access_token_is_refused(
    server: ResourceServer, issuer: LocalIssuer, typ: object
) -> None:
    said = await refused(server, issuer.sign(claims(issuer), headers={"typ": typ}))
    assert "typ" in said.description


@pytest.mark.parametrize("url", ["http://id.example", "http://10.0.0.5:8080"])
def test_an_issuer_outside_loopback_must_be_https(url: str) -> None:
    with pytest.raises(SettingsError, match="must be https"):
        load_settings(mcp_oauth_issuer=url)
    for fine in ("https://id.example", "http://127.0.0.1:9000", "http://localhost:9000"):
        assert load_settings(mcp_oauth_issuer=fine).mcp_issuers == (fine,)


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        (None, oauth.KEYS_DEFAULT_AGE),
        ("public, max-age=900", 900.0),
        ("max-age=5", oauth.KEYS_MIN_AGE),
        ("max-age=86400", oauth.KEYS_MAX_AGE),
        ("no-store", oauth.KEYS_MIN_AGE),
        ("max-age=soon", oauth.KEYS_DEFAULT_AGE),
    ],
)
def test_the_keys_are_kept_for_their_max_age_bounded(header: str | None, seconds: float) -> None:
    assert oauth._max_age(header) == seconds


async def test_a_withdrawn_key_stops_being_trusted_once_the_keys_max_age_has_passed(
    server: ResourceServer, issuer: LocalIssuer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, keys were fetched again only for an unknown kid: a withdrawn key (and every token
    it signed, remembered as verified) stayed trusted until a restart."""
    monkeypatch.setattr(oauth, "KEYS_MIN_AGE", 0.0)  # so that max-age=0 is taken as it is
    monkeypatch.setattr(oauth, "KEY_REFRESH_SECONDS", 0.0)
    issuer.cache_control = "max-age=0"
    old = issuer.sign(claims(issuer))
    assert (await server.authenticate(old)).subject == "alice"
    fetches = issuer.jwks_fetches
    issuer.rotate("k2")  # the issuer withdraws k1
    said = await refused(server, old)
    assert "k1" in said.description and issuer.jwks_fetches > fetches
    assert (await server.authenticate(issuer.sign(claims(issuer)))).subject == "alice"
    issuer.cache_control = None

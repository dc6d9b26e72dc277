"""MCP authorization: the service as an OAuth 2.1 resource server for persons' access tokens.

The service is no authorization server: any OIDC provider is one (``MCP_OAUTH_ISSUER``). It
publishes its protected-resource metadata (RFC 9728) naming that issuer, and takes an access token
that is a JWT (RFC 9068) signed by a key of the issuer's JWKS — the ``jwks_uri`` of its metadata
(``/.well-known/openid-configuration``, else RFC 8414's ``/.well-known/oauth-authorization-server``)
— with ``iss`` the issuer, ``aud`` this resource (``MCP_RESOURCE_URL``, RFC 8707), ``exp`` (and any
``nbf``) in force, a ``sub``, and every scope of ``MCP_OAUTH_SCOPES``. Each failure has its own
sentence, and the ``WWW-Authenticate`` challenge of RFC 6750 (``invalid_token``,
``insufficient_scope``).

On the hot path a token seen before costs one SHA-256 and a dict lookup (until it expires); a new
one one signature check against a cached key. The keys are fetched on first use, again once they
are older than the JWKS answer's ``Cache-Control: max-age`` (bounded: ``KEYS_MIN_AGE`` to
``KEYS_MAX_AGE``), and when a token names an unknown ``kid`` (key rotation) — each at most once per
``KEY_REFRESH_SECONDS`` per issuer. A key set that changed forgets every verified token, so a
withdrawn key's tokens stop working within its max-age. A token longer than ``TOKEN_MAX_CHARS`` is
refused before it is hashed or parsed; a ``typ`` other than an access token's (RFC 9068's
``at+jwt``, or ``JWT``) is refused; issuers and their ``jwks_uri`` are ``https`` outside loopback.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
from dataclasses import dataclass
from typing import Any

import httpx
import jwt
import structlog
from jwt import PyJWK, PyJWKSet

from service.domain.errors import Unavailable
from service.mcp.binding import person_conversation_id
from service.settings import Settings, is_https_or_loopback

log = structlog.get_logger("service.mcp.oauth")

#: Asymmetric signatures only: never ``none``, never a MAC keyed with something public.
ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
#: An unknown ``kid`` refetches the issuer's keys at most this often.
KEY_REFRESH_SECONDS = 30.0
#: Known keys are refetched once this old — the JWKS answer's ``Cache-Control: max-age``, bounded
#: to [KEYS_MIN_AGE, KEYS_MAX_AGE]; without one, KEYS_DEFAULT_AGE — so a key the issuer withdrew
#: stops being trusted within that time, not at the next restart.
KEYS_MIN_AGE = 60.0
KEYS_DEFAULT_AGE = 300.0
KEYS_MAX_AGE = 3600.0
#: The ``typ`` of an access token a JWT header may name (RFC 9068; ``JWT`` many issuers still set).
ACCESS_TOKEN_TYPES = frozenset({"at+jwt", "application/at+jwt", "jwt"})
#: Tokens remembered as valid (until their ``exp``); past this many the oldest are forgotten.
CACHED_TOKENS = 4096
#: A longer bearer token is refused before it is hashed or parsed. JWT access tokens of the usual
#: providers are 1-2 KB, 4-6 KB with many group or role claims; 8 KiB is also what a proxy
#: commonly takes as one header line (nginx's ``large_client_header_buffers`` default, 8k).
TOKEN_MAX_CHARS = 8192
METADATA_PATH = "/.well-known/oauth-protected-resource"


@dataclass(frozen=True, slots=True)
class Person:
    """Whom a valid access token speaks for."""

    issuer: str
    subject: str
    client_id: str
    scopes: tuple[str, ...]
    expires_at: int
    conversation_id: str  # the one conversation the token reaches (service.mcp.binding)


class TokenRefused(Exception):  # noqa: N818 - a refusal is an answer, not a fault
    """A person's token this resource does not take: 401 ``invalid_token`` or 403
    ``insufficient_scope``, with a sentence saying why."""

    def __init__(self, description: str, *, error: str = "invalid_token", status: int = 401) -> None:
        super().__init__(description)
        self.description = description
        self.error = error
        self.status = status


def metadata_url(resource: str) -> str:
    """Where RFC 9728 puts the metadata of ``resource``: the well-known path, then its path."""
    scheme, _, rest = resource.partition("://")
    host, slash, path = rest.partition("/")
    return f"{scheme}://{host}{METADATA_PATH}{slash}{path}".rstrip("/")


class _Issuer:
    """One authorization server: its metadata's ``jwks_uri`` and its keys by ``kid``."""

    def __init__(self, issuer: str, http: httpx.AsyncClient) -> None:
        self.issuer = issuer
        self._http = http
        self._jwks_uri: str | None = None
        self._keys: dict[str | None, PyJWK] = {}
        self._fetched_at = float("-inf")
        self._fresh_until = float("-inf")  # when the keys are to be fetched again (max-age)
        self._unavailable: str | None = None  # why the last fetch failed, until one succeeds
        self._lock = asyncio.Lock()
        self.generation = 0  # counts key sets that changed (the resource forgets verified tokens)

    async def _discover(self) -> str:
        base = self.issuer.rstrip("/")
        scheme, _, rest = base.partition("://")
        host, slash, path = rest.partition("/")
        candidates = [
            f"{base}/.well-known/openid-configuration",
            f"{scheme}://{host}/.well-known/oauth-authorization-server{slash}{path}".rstrip("/"),
        ]
        for url in candidates:
            answer = await self._http.get(url)
            if answer.status_code != 200:
                continue
            metadata = answer.json()
            if not isinstance(metadata, dict):
                raise Unavailable(f"the metadata at {url} is not a JSON object")
            if metadata.get("issuer") != self.issuer:
                raise Unavailable(f"the metadata at {url} names another issuer: {metadata.get('issuer')!r}")
            if not isinstance(metadata.get("jwks_uri"), str):
                raise Unavailable(f"the metadata at {url} names no jwks_uri")
            if not is_https_or_loopback(metadata["jwks_uri"]):
                raise Unavailable(f"the jwks_uri of {url} must be https:// (http:// only on loopback)")
            return str(metadata["jwks_uri"])
        raise Unavailable(f"the authorization server {self.issuer} publishes no metadata")

    async def _refresh(self) -> None:
        try:
            if self._jwks_uri is None:
                self._jwks_uri = await self._discover()
            answer = await self._http.get(self._jwks_uri)
            answer.raise_for_status()
            keys = PyJWKSet.from_dict(answer.json()).keys
            age = _max_age(answer.headers.get("cache-control"))
        except (httpx.HTTPError, ValueError, jwt.PyJWKSetError, Unavailable) as failure:
            log.warning("oauth_keys_unavailable", issuer=self.issuer, error=str(failure))
            self._unavailable = (
                failure.message
                if isinstance(failure, Unavailable)
                else f"the keys of the authorization server {self.issuer} could not be fetched; retry"
            )
            raise Unavailable(self._unavailable) from None
        finally:
            self._fetched_at = time.monotonic()
        self._unavailable = None
        self._fresh_until = self._fetched_at + age
        keys_now = {key.key_id: key for key in keys if key.public_key_use in (None, "sig")}
        if set(keys_now) != set(self._keys):
            self.generation += 1
        self._keys = keys_now
        log.info("oauth_keys_fetched", issuer=self.issuer, keys=len(self._keys), max_age=age)

    async def _refresh_stale(self) -> None:
        """Known keys past their max-age are fetched again; while the issuer cannot be reached
        the known ones serve on (retried at most every KEY_REFRESH_SECONDS), never none."""
        async with self._lock:
            if (
                time.monotonic() < self._fresh_until
                or time.monotonic() - self._fetched_at < KEY_REFRESH_SECONDS
            ):
                return
            with contextlib.suppress(Unavailable):
                await self._refresh()

    async def fresh(self) -> None:
        """The known keys, fetched again first when past their max-age."""
        if self._keys and time.monotonic() >= self._fresh_until:
            await self._refresh_stale()

    async def key(self, kid: str | None) -> PyJWK:
        await self.fresh()
        key = self._keys.get(kid)
        if key is not None:
            return key
        async with self._lock:
            key = self._keys.get(kid)
            if key is None and time.monotonic() - self._fetched_at >= KEY_REFRESH_SECONDS:
                await self._refresh()
                key = self._keys.get(kid)
        if key is None and kid is None and len(self._keys) == 1:
            return next(iter(self._keys.values()))
        if key is None and self._unavailable is not None:
            raise Unavailable(self._unavailable)  # not the token's fault: the keys are not known yet
        if key is None:
            raise TokenRefused(f"the token is signed with a key {self.issuer} does not publish (kid {kid!r})")
        return key


class ResourceServer:
    """What ``/mcp`` takes from a person, and the metadata that tells clients how to get it."""

    def __init__(self, settings: Settings, http: httpx.AsyncClient | None = None) -> None:
        resource = settings.mcp_resource
        assert resource is not None, "MCP authorization is on only with an issuer and a resource"
        self.resource = resource
        self.scopes = settings.mcp_scopes
        self.leeway = settings.mcp_oauth_clock_skew_seconds
        self._http = http or httpx.AsyncClient(timeout=10.0, follow_redirects=False)
        self._issuers = {issuer: _Issuer(issuer, self._http) for issuer in settings.mcp_issuers}
        self._valid: dict[bytes, Person] = {}
        self._generation = 0
        self._decoder = jwt.PyJWT()
        self.metadata_url = metadata_url(resource)
        # Built once: the challenge that names the metadata (RFC 9728 section 5.1) and the scopes.
        scope = f', scope="{" ".join(self.scopes)}"' if self.scopes else ""
        self._challenge = f'Bearer resource_metadata="{self.metadata_url}"{scope}'

    async def close(self) -> None:
        await self._http.aclose()

    def metadata(self) -> dict[str, Any]:
        """The protected-resource metadata (RFC 9728)."""
        document: dict[str, Any] = {
            "resource": self.resource,
            "authorization_servers": list(self._issuers),
            "bearer_methods_supported": ["header"],
            "resource_signing_alg_values_supported": list(ALGORITHMS),
            "resource_name": "Lineup Runtime MCP",
        }
        if self.scopes:
            document["scopes_supported"] = list(self.scopes)
        return document

    def challenge(self, refused: TokenRefused | None = None) -> str:
        """The ``WWW-Authenticate`` value: bare for a request without a token (RFC 6750 3.1)."""
        if refused is None:
            return self._challenge
        description = refused.description.replace("\\", "").replace('"', "'")
        return f'{self._challenge}, error="{refused.error}", error_description="{description}"'

    async def authenticate(self, token: str) -> Person:
        """The person a token speaks for, or ``TokenRefused`` saying why not (``Unavailable``
        when the issuer's keys cannot be fetched)."""
        if len(token) > TOKEN_MAX_CHARS:  # before any hash or parse: a huge token costs nothing
            raise oversized()
        for issuer in self._issuers.values():  # keys past their max-age: fetched again first
            await issuer.fresh()
        generation = sum(issuer.generation for issuer in self._issuers.values())
        if generation != self._generation:  # a key set changed: verify every token afresh
            self._valid.clear()
            self._generation = generation
        digest = hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()
        person = self._valid.get(digest)
        if person is not None:
            if time.time() < person.expires_at + self.leeway:
                return person
            del self._valid[digest]
            raise TokenRefused("the token has expired")
        person = await self._verify(token)
        if len(self._valid) >= CACHED_TOKENS:
            del self._valid[next(iter(self._valid))]
        self._valid[digest] = person
        return person

    async def _verify(self, token: str) -> Person:
        try:
            header = jwt.get_unverified_header(token)
            unverified = self._decoder.decode(token, options={"verify_signature": False})
        except jwt.PyJWTError:  # any malformed part (kid, crit, the payload, ...): never a 500
            raise TokenRefused("the token is not a JWT access token this resource takes") from None
        named = unverified.get("iss") if isinstance(unverified, dict) else None
        issuer = self._issuers.get(named) if isinstance(named, str) else None
        if issuer is None:
            raise TokenRefused(f"the token is not of an accepted issuer ({', '.join(self._issuers)})")
        if header.get("alg") not in ALGORITHMS:
            raise TokenRefused(f"the token's algorithm {header.get('alg')!r} is not accepted")
        typ = header.get("typ")
        if typ is not None and (not isinstance(typ, str) or typ.lower() not in ACCESS_TOKEN_TYPES):
            # RFC 9068: an access token says so (at+jwt); an ID token, a logout token or any
            # other JWT of the issuer is none, even with the right audience.
            raise TokenRefused(f"the token's typ {typ!r} is not an access token's (at+jwt)")
        key = await issuer.key(header.get("kid"))
        try:
            claims = self._decoder.decode(
                token,
                key,
                algorithms=[header["alg"]],
                audience=self.resource,
                issuer=issuer.issuer,
                leeway=self.leeway,
                options={"require": ["exp", "iss", "aud", "sub"]},
            )
        except jwt.ExpiredSignatureError:
            raise TokenRefused("the token has expired") from None
        except jwt.ImmatureSignatureError:
            raise TokenRefused("the token is not valid yet (nbf, iat)") from None
        except jwt.InvalidAudienceError:
            raise TokenRefused(
                f"the token is not for this resource: its aud must be {self.resource}"
            ) from None
        except jwt.InvalidSignatureError:
            raise TokenRefused("the token's signature does not verify") from None
        except jwt.MissingRequiredClaimError as missing:
            raise TokenRefused(f"the token has no {missing.claim} claim") from None
        except jwt.exceptions.InvalidSubjectError:
            raise TokenRefused("the token's sub is not a string") from None
        except jwt.PyJWTError as invalid:  # every other refusal of the library is the token's
            raise TokenRefused(f"the token is not valid: {invalid}") from None
        granted = _scopes(claims)
        lacking = [scope for scope in self.scopes if scope not in granted]
        if lacking:
            raise TokenRefused(
                f"the token lacks the scope {' '.join(lacking)}",
                error="insufficient_scope",
                status=403,
            )
        subject = claims["sub"]
        if not _proper(subject) or not subject:
            raise TokenRefused("the token's sub is not a string of Unicode characters")
        client_id = claims.get("client_id", claims.get("azp", ""))
        if not _proper(client_id):
            raise TokenRefused("the token's client_id (azp) is not a string of Unicode characters")
        return Person(
            issuer.issuer,
            subject,
            str(client_id),
            granted,
            int(claims["exp"]),
            person_conversation_id(issuer.issuer, subject),
        )


def _max_age(cache_control: str | None) -> float:
    """How long a JWKS answer may be kept: its ``max-age``, bounded; ``no-store``/``no-cache``:
    the least."""
    if cache_control is None:
        return KEYS_DEFAULT_AGE
    directives = [part.strip().lower() for part in cache_control.split(",")]
    if "no-store" in directives or "no-cache" in directives:
        return KEYS_MIN_AGE
    for directive in directives:
        name, _, value = directive.partition("=")
        if name.strip() == "max-age" and value.strip().isdigit():
            return min(max(float(value.strip()), KEYS_MIN_AGE), KEYS_MAX_AGE)
    return KEYS_DEFAULT_AGE


def oversized() -> TokenRefused:
    return TokenRefused(f"the token is longer than {TOKEN_MAX_CHARS} characters")


def _proper(value: object) -> bool:
    """A string that is text: JSON's ``\\ud800`` escapes decode to lone surrogates, which no
    UTF-8 encoding (a conversation id, a log line, the database) takes."""
    if not isinstance(value, str):
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _scopes(claims: dict[str, Any]) -> tuple[str, ...]:
    scope = claims.get("scope", claims.get("scp", ""))
    if isinstance(scope, str):
        return tuple(scope.split())
    if isinstance(scope, list):
        return tuple(str(s) for s in scope)
    return ()

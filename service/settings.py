"""One settings object for every process, read from the environment.

Each command states which variables it needs; a missing or invalid one stops the process
at start with a message naming it (``SettingsError``).
"""

from __future__ import annotations

import base64
import binascii
import itertools
from pathlib import Path
from urllib.parse import urlsplit

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from service.db import urls

_REPO_ROOT = Path(__file__).resolve().parents[1]

#: The variables each command cannot start without.
REQUIRED_FOR: dict[str, tuple[str, ...]] = {
    "migrate": ("DATABASE_URL",),
    "serve": ("DATABASE_URL", "AGENT_TOKEN", "HOST_TOKEN", "OPERATOR_TOKEN"),
    "relay": ("DATABASE_URL", "AGENT_WEBHOOK_URL", "WEBHOOK_SECRET"),
    "ops": ("DATABASE_URL",),
}


class SettingsError(Exception):
    """A variable is missing or invalid; the message names it."""


#: What the example files hold where a secret belongs: a value that cannot work unchanged.
PLACEHOLDER = "change-me"
#: A secret with fewer different characters than this is too easy to guess ("aaaa…", "1212…").
MIN_DISTINCT_CHARACTERS = 8
MAKE_ONE = "python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"
# How to make one, not one.
MAKE_WEBHOOK_SECRET = "WEBHOOK_SECRET with " + (
    "python3 -c 'import base64, secrets; "
    'print("whsec_" + base64.b64encode(secrets.token_bytes(32)).decode())\''
)
_AUDIENCES = ("AGENT_TOKEN", "HOST_TOKEN", "OPERATOR_TOKEN")


def _guessable(secret: str) -> bool:
    return len(set(secret.removeprefix("whsec_"))) < MIN_DISTINCT_CHARACTERS


def split_tokens(value: str | None) -> tuple[str, ...]:
    """The tokens a variable holds, separated by commas or spaces (several while one rotates)."""
    if not value:
        return ()
    return tuple(part for part in value.replace(",", " ").split() if part)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_file=None, extra="ignore", frozen=True)

    database_url: str | None = None
    agent_token: str | None = None
    host_token: str | None = None
    operator_token: str | None = None
    agent_webhook_url: str | None = None
    webhook_secret: str | None = None
    # With these three, a row whose every attempt fails is retried for 24 to 48 hours before it is
    # dead (relay.backoff.retry_span); time held by a pause or an open circuit comes on top.
    relay_max_attempts: int = Field(60, ge=1, le=1000)
    relay_backoff_base_seconds: float = Field(1.0, gt=0, le=3600)
    relay_backoff_max_seconds: float = Field(3600.0, gt=0, le=86400)
    relay_timeout_seconds: float = Field(10.0, gt=0, le=300)
    manifests_dir: Path = _REPO_ROOT / "manifests"
    interrupt_late_window_seconds: int = Field(300, ge=0, le=86400)
    db_pool_size: int = Field(10, ge=1, le=200)
    # Server-side prepared statements (psycopg's automatic prepare and the hot path's explicit
    # ones). Off for a pooler in transaction mode (PgBouncer before 1.21, most managed poolers):
    # every connection then runs with prepare_threshold=None (service.db.pool).
    db_prepared_statements: bool = True
    # A direct (or session-pooled) URL for what needs a session of its own: the LISTEN of the
    # event streams, MCP pushes and the relay. Unset: DATABASE_URL, unless that leads through a
    # transaction pooler, in which case they poll (PROJECTION_POLL_SECONDS, RELAY_POLL_INTERVAL_SECONDS).
    listen_database_url: str | None = None
    # Behind a transaction pooler without LISTEN_DATABASE_URL: how often each service process
    # looks for projection changes other processes committed (an event's extra delay at most).
    projection_poll_seconds: float = Field(1.0, ge=0.05, le=60)
    request_max_body_bytes: int = Field(65536, ge=1024, le=10 * 1024 * 1024)
    # Persons' sessions on the Host API, minted by the Host backend (POST /v1/host/sessions) and
    # signed with their own secret, never derived from HOST_TOKEN. Unset: minting answers 503.
    host_session_secret: str | None = Field(None, min_length=32)
    # Whether the host page's sign-in also takes HOST_TOKEN itself (a session reaching every
    # conversation): for one person on their own machine (dev), never for a shared deployment.
    host_token_sign_in: bool = False
    # Cookies are Secure (and named __Host-…); off only for plain http on 127.0.0.1 (dev).
    cookie_secure: bool = True
    # The origin browsers reach the service at (https://host[:port]), named in the MiniApp pages'
    # Content-Security-Policy; taken from configuration, never from a request's Host header.
    public_origin: str | None = None
    # Event streams open at once: per person's session, and in all on one process.
    sse_streams_per_session: int = Field(8, ge=1, le=1000)
    sse_streams_total: int = Field(1000, ge=1, le=100000)
    # How often a process asks the database whether the sessions of its open streams still are:
    # a session ended on another replica stops its streams here within this many seconds.
    sse_session_check_seconds: float = Field(5.0, ge=0.05, le=60)
    # SDK capabilities one person's session may mint (each lives only as long as that session).
    capabilities_per_session: int = Field(1000, ge=1, le=100000)
    # The interactive API pages (/schema/swagger, self-hosted); the JSON and YAML documents are
    # always served.
    api_docs_ui: bool = False
    # The deadline sweeper of ``serve``: claimers settling due rows side by side (SKIP LOCKED),
    # rows per settle statement, and the poll that finds deadlines other replicas opened.
    sweeper_claimers: int = Field(2, ge=1, le=16)
    sweeper_batch_size: int = Field(200, ge=1, le=5000)
    sweeper_poll_seconds: float = Field(1.0, ge=0.05, le=60)
    # After-commit wake-ups of other processes: at most one NOTIFY statement per this interval.
    wakeup_interval_seconds: float = Field(0.005, ge=0, le=1)
    # The relay (``python -m relay``).
    relay_poll_only: bool = False  # for connection poolers that drop LISTEN
    relay_poll_interval_seconds: float = Field(1.0, ge=0.01, le=60)
    relay_concurrency: int = Field(64, ge=1, le=1024)
    relay_batch_size: int = Field(100, ge=1, le=1000)
    # Default max(30, 3 x RELAY_TIMEOUT_SECONDS), the contract's value; lower it only in tests.
    relay_lease_seconds: float | None = Field(None, gt=0, le=86400)
    relay_metrics_host: str = "127.0.0.1"
    # Off unless set: relays on one host must never collide on a default port. 0 is off too.
    relay_metrics_port: int | None = Field(None, ge=0, le=65535)
    relay_retention_days: int = Field(7, ge=1, le=3650)
    # Dead rows are kept longer than delivered ones: each is a result the Agent never got. 0: kept.
    relay_dead_retention_days: int = Field(30, ge=0, le=3650)
    # The endpoint's circuit (relay.circuit): endpoint failures in a row that open it, and the
    # time between probes while it is open (a Retry-After may ask for longer).
    relay_circuit_failures: int = Field(10, ge=1, le=10000)
    relay_circuit_probe_seconds: float = Field(5.0, ge=0.05, le=3600)
    relay_shutdown_grace_seconds: float = Field(5.0, ge=0, le=300)
    relay_id: str | None = Field(None, min_length=1, max_length=200)
    # Set by `python -m service dev` for the processes it starts: its secrets are made at random
    # (or chosen by the person on their own machine), so the deployment checks of secrets are off.
    lineup_dev_stack: bool = False

    @field_validator("database_url", "listen_database_url")
    @classmethod
    def _postgres_url(cls, value: str | None) -> str | None:
        if value is None or value == "":
            return None
        urls.parse(value)  # one host or several (h1:5432,h2:5432); ValueError says what is wrong
        return value

    @field_validator("agent_token", "host_token", "operator_token")
    @classmethod
    def _token_strength(cls, value: str | None) -> str | None:
        if value is None or value == "":
            return None
        for token in split_tokens(value):
            if len(token) < 16:
                raise ValueError("every token must be at least 16 characters")
        return value

    @field_validator("public_origin")
    @classmethod
    def _origin(cls, value: str | None) -> str | None:
        if value is None or value == "":
            return None
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/"):
            raise ValueError("must be an origin: http(s)://host[:port], nothing after it")
        if parts.query or parts.fragment or parts.username or parts.password:
            raise ValueError("must be an origin: http(s)://host[:port], nothing after it")
        return f"{parts.scheme}://{parts.netloc}".lower()

    @field_validator("agent_webhook_url")
    @classmethod
    def _webhook_url(cls, value: str | None) -> str | None:
        if value is None or value == "":
            return None
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("must be an http:// or https:// URL with a host")
        return value

    @field_validator("webhook_secret")
    @classmethod
    def _webhook_secrets(cls, value: str | None) -> str | None:
        if value is None or value == "":
            return None
        if PLACEHOLDER in value.lower():
            return value  # the relay refuses it at start, with every other problem (secret_problems)
        for position, secret in enumerate(value.split(), start=1):
            if not secret.startswith("whsec_"):
                raise ValueError(f"secret {position} does not start with whsec_")
            encoded = secret.removeprefix("whsec_").rstrip("=")
            try:
                # Padding is optional, as in the standardwebhooks library.
                key = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
            except (binascii.Error, ValueError):
                raise ValueError(f"secret {position} is not whsec_ followed by base64") from None
            if len(key) < 16:
                raise ValueError(f"secret {position} is shorter than 16 bytes")
        return value

    @field_validator("manifests_dir")
    @classmethod
    def _existing_dir(cls, value: Path) -> Path:
        if not value.is_dir():
            raise ValueError(f"{value} is not a directory")
        return value

    @property
    def psycopg_url(self) -> str:
        """The URL in the form psycopg accepts: no SQLAlchemy driver suffix, and with several hosts
        ``target_session_attrs=read-write`` unless the URL says otherwise (``service.db.urls``)."""
        return urls.psycopg_url(self.database_url) if self.database_url else ""

    @property
    def listen_psycopg_url(self) -> str | None:
        """``LISTEN_DATABASE_URL`` in the form psycopg accepts, or None when unset."""
        return urls.psycopg_url(self.listen_database_url) if self.listen_database_url else None

    @property
    def webhook_secrets(self) -> tuple[str, ...]:
        """Every Standard Webhooks secret; during a rotation each of them signs."""
        return tuple((self.webhook_secret or "").split())

    @property
    def relay_lease(self) -> float:
        """How long a relay's claim on a row lasts before any relay may take it."""
        if self.relay_lease_seconds is not None:
            return self.relay_lease_seconds
        return max(30.0, 3 * self.relay_timeout_seconds)

    def tokens(self, audience: str) -> tuple[str, ...]:
        """All accepted tokens of one audience; several allow rotation."""
        return split_tokens(getattr(self, f"{audience}_token"))

    def secret_problems(self, command: str) -> list[str]:
        """What makes this process's secrets unfit for a deployment: an example's placeholder, a
        guessable value, one token for two audiences, a session secret made of a token."""
        secrets: dict[str, tuple[str, ...]] = {}
        if command == "serve":
            secrets = {name: split_tokens(getattr(self, name.lower())) for name in _AUDIENCES}
            if self.host_session_secret:
                secrets["HOST_SESSION_SECRET"] = (self.host_session_secret,)
        if command == "relay":
            secrets = {"WEBHOOK_SECRET": self.webhook_secrets}
        if command in ("serve", "relay", "migrate") and self.database_url:
            password = urls.password(self.database_url)
            secrets["DATABASE_URL"] = (password,) if password else ()
        placeholders = [n for n, values in secrets.items() if any(PLACEHOLDER in v.lower() for v in values)]
        guessable = [
            n
            for n, values in secrets.items()
            if n not in placeholders and n != "DATABASE_URL" and any(_guessable(v) for v in values)
        ]
        problems = []
        if placeholders:
            problems.append(f"{', '.join(placeholders)}: still the example's placeholder ({PLACEHOLDER}…)")
        if guessable:
            few = f"fewer than {MIN_DISTINCT_CHARACTERS} different characters"
            problems.append(f"{', '.join(guessable)}: too easy to guess ({few})")
        for first, second in itertools.combinations(_AUDIENCES, 2):
            if set(secrets.get(first, ())) & set(secrets.get(second, ())):
                problems.append(f"{first} and {second} share a token: each audience needs its own")
        session_secret = (self.host_session_secret or "").lower()
        for name in _AUDIENCES:
            for token in secrets.get(name, ()) if session_secret else ():
                if token.lower() in session_secret or session_secret in token.lower():
                    problems.append(f"HOST_SESSION_SECRET must not be made from {name}")
        if problems:
            how = [MAKE_WEBHOOK_SECRET] if "WEBHOOK_SECRET" in placeholders + guessable else []
            problems.append(" and ".join([f"make a token or secret with {MAKE_ONE}", *how]))
        return list(dict.fromkeys(problems))

    def require(self, command: str) -> Settings:
        missing = [name for name in REQUIRED_FOR.get(command, ()) if not getattr(self, name.lower())]
        if missing:
            where = (
                " (start `make dev` in this directory, or set DATABASE_URL)"
                if "DATABASE_URL" in missing
                else ""
            )
            raise SettingsError(
                f"{command}: missing required environment variable(s): {', '.join(missing)}{where}"
            )
        if not self.lineup_dev_stack and (problems := self.secret_problems(command)):
            raise SettingsError(f"{command}: " + "; ".join(problems))
        if self.relay_backoff_base_seconds > self.relay_backoff_max_seconds and command == "relay":
            raise SettingsError("RELAY_BACKOFF_BASE_SECONDS must not exceed RELAY_BACKOFF_MAX_SECONDS")
        if command == "relay" and self.relay_lease <= self.relay_timeout_seconds:
            raise SettingsError("RELAY_LEASE_SECONDS must exceed RELAY_TIMEOUT_SECONDS")
        return self


def load_settings(command: str | None = None, **overrides: object) -> Settings:
    """Read the environment; raise ``SettingsError`` naming every bad variable."""
    try:
        settings = Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            name = str(error["loc"][0]).upper() if error["loc"] else "?"
            problems.append(f"{name}: {error['msg']}")
        raise SettingsError("invalid environment: " + "; ".join(problems)) from None
    if command is not None:
        settings.require(command)
    return settings

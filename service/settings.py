"""One settings object for every process, read from the environment.

Each command states which variables it needs; a missing or invalid one stops the process
at start with a message naming it (``SettingsError``).

Every variable belongs to one group, by who needs it (``GROUPS``): a field is declared with its
group's function — ``relay_concurrency: int = tuning(64, ge=1, le=1024)``, the variable being the
field's name in capitals — and documented by one row in its group's table of docs/operations.md,
"Settings" (``tests/unit/test_settings_documented.py`` keeps the two in step). A secret says so
(``secret=True``): ``python -m service settings`` masks its value.
"""

from __future__ import annotations

import base64
import binascii
import itertools
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from service.apps import APPS_DIR, MANIFEST, folders
from service.db import urls

#: The variables each command cannot start without.
REQUIRED_FOR: dict[str, tuple[str, ...]] = {
    "migrate": ("DATABASE_URL",),
    "serve": ("DATABASE_URL", "AGENT_TOKEN", "HOST_TOKEN", "OPERATOR_TOKEN"),
    "relay": ("DATABASE_URL", "AGENT_WEBHOOK_URL", "WEBHOOK_SECRET"),
    "ops": ("DATABASE_URL",),
    "roles": ("DATABASE_URL",),
}


Group = Literal["required", "common", "tuning", "roles", "development"]
#: Who needs the variables of each group, in the order docs/operations.md, "Settings", lists them.
GROUPS: dict[Group, str] = {
    "required": "Required: a command refuses to start without them (see REQUIRED_FOR)",
    "common": "Common: what a deployment sets as it needs (features, addresses, retention, metrics)",
    "tuning": "Tuning: limits, intervals and sizes whose defaults suit every known deployment",
    "roles": "Database roles: python -m service roles, and migrate keeping their grants",
    "development": "Development only: set by make dev; never in a deployment",
}


def _setting(group: Group, default: Any, secret: bool, rules: dict[str, Any]) -> Any:
    return Field(default, json_schema_extra={"group": group, "secret": secret}, **rules)


def required(default: Any = None, *, secret: bool = False, **rules: Any) -> Any:
    """A setting some command cannot start without (pydantic's ``Field`` rules: ``ge``, ``le``, …)."""
    return _setting("required", default, secret, rules)


def common(default: Any = None, *, secret: bool = False, **rules: Any) -> Any:
    """A setting a deployment sets as it needs."""
    return _setting("common", default, secret, rules)


def tuning(default: Any = None, *, secret: bool = False, **rules: Any) -> Any:
    """A limit, interval or size whose default suits every known deployment."""
    return _setting("tuning", default, secret, rules)


def roles(default: Any = None, *, secret: bool = False, **rules: Any) -> Any:
    """A database role's name or password."""
    return _setting("roles", default, secret, rules)


def development(default: Any = None, *, secret: bool = False, **rules: Any) -> Any:
    """A setting of the development stack alone."""
    return _setting("development", default, secret, rules)


_LOOPBACK_NAMES = ("localhost", "127.0.0.1")


def loopback_forms(origin: str) -> set[str]:
    """A loopback origin under each of its names (``make dev``'s stack is reached at
    ``http://localhost:PORT`` and ``http://127.0.0.1:PORT`` alike); another origin: none."""
    parts = urlsplit(origin)
    if parts.hostname not in _LOOPBACK_NAMES:
        return set()
    port = f":{parts.port}" if parts.port is not None else ""
    return {f"{parts.scheme}://{name}{port}" for name in _LOOPBACK_NAMES}


def is_https_or_loopback(url: str) -> bool:
    """An ``https`` URL, or an ``http`` one whose host is a loopback name or address."""
    parts = urlsplit(url)
    return parts.scheme == "https" or (
        parts.scheme == "http" and parts.hostname in ("localhost", "127.0.0.1", "::1")
    )


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
_AUDIENCES = ("AGENT_TOKEN", "HOST_TOKEN", "OPERATOR_TOKEN", "METRICS_TOKEN")


def _guessable(secret: str) -> bool:
    return len(set(secret.removeprefix("whsec_"))) < MIN_DISTINCT_CHARACTERS


def split_tokens(value: str | None) -> tuple[str, ...]:
    """The tokens a variable holds, separated by commas or spaces (several while one rotates)."""
    if not value:
        return ()
    return tuple(part for part in value.replace(",", " ").split() if part)


def split_folders(value: str | None) -> tuple[Path, ...]:
    """The folders a variable names, separated by commas."""
    return tuple(Path(part.strip()) for part in (value or "").split(",") if part.strip())


def _as_origin(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/"):
        raise ValueError("must be an origin: http(s)://host[:port], nothing after it")
    if parts.query or parts.fragment or parts.username or parts.password:
        raise ValueError("must be an origin: http(s)://host[:port], nothing after it")
    return f"{parts.scheme}://{parts.netloc}".lower()


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_file=None, extra="ignore", frozen=True)

    database_url: str | None = required(None, secret=True)
    agent_token: str | None = required(None, secret=True)
    host_token: str | None = required(None, secret=True)
    operator_token: str | None = required(None, secret=True)
    # Who may read the service's GET /metrics (it shows the backlog, dead rows, pause and circuit
    # state). Unset, both: without a token, peers on a private network only (loopback, RFC 1918,
    # unique-local, link-local: the contract's probe and a Prometheus beside the service), so the
    # default is safe on a public port. METRICS_TOKEN set or METRICS_PUBLIC=false: only a bearer
    # METRICS_TOKEN (Prometheus's, reaching nothing else) or OPERATOR_TOKEN. METRICS_PUBLIC=true:
    # anyone who reaches the port.
    metrics_token: str | None = common(None, secret=True)
    metrics_public: bool | None = common(None)
    agent_webhook_url: str | None = required(None)
    webhook_secret: str | None = required(None, secret=True)
    # With these three, a row whose every attempt fails is retried for 24 to 48 hours before it is
    # dead (relay.backoff.retry_span); time held by a pause or an open circuit comes on top.
    relay_max_attempts: int = tuning(60, ge=1, le=1000)
    relay_backoff_base_seconds: float = tuning(1.0, gt=0, le=3600)
    relay_backoff_max_seconds: float = tuning(3600.0, gt=0, le=86400)
    relay_timeout_seconds: float = tuning(10.0, gt=0, le=300)
    # The apps this service runs (``Settings.apps``): every app folder of MANIFESTS_DIR (a folder of
    # app folders; by default the shipped ones, ``service/apps/``), then each folder APP_FOLDERS
    # names (one app each, separated by commas). One registry is built from them (service.manifests).
    manifests_dir: Path = common(APPS_DIR)
    app_folders: str | None = common(None)
    interrupt_late_window_seconds: int = common(300, ge=0, le=86400)
    db_pool_size: int = common(10, ge=1, le=200)
    # Server-side prepared statements (psycopg's automatic prepare and the hot path's explicit
    # ones). Off for a pooler in transaction mode (PgBouncer before 1.21, most managed poolers):
    # every connection then runs with prepare_threshold=None (service.db.pool).
    db_prepared_statements: bool = common(True)
    # A direct (or session-pooled) URL for what needs a session of its own: the LISTEN of the
    # event streams, MCP pushes and the relay. Unset: DATABASE_URL, unless that leads through a
    # transaction pooler, in which case they poll (PROJECTION_POLL_SECONDS, RELAY_POLL_INTERVAL_SECONDS).
    listen_database_url: str | None = common(None, secret=True)
    # Every database connection's bounds on a vanished peer (service.db.urls; a URL's own libpq
    # parameters win): a connect gives up after DB_CONNECT_TIMEOUT_SECONDS; TCP keepalives probe a
    # connection silent for DB_KEEPALIVES_IDLE_SECONDS, every DB_KEEPALIVES_INTERVAL_SECONDS,
    # DB_KEEPALIVES_COUNT times; and data unacknowledged for DB_TCP_USER_TIMEOUT_SECONDS (0: the
    # kernel's ~15 minutes) ends the connection. A partition that leaves connections half-open then
    # costs a few seconds, not TCP's minutes (docs/operations.md, "When the network fails").
    db_connect_timeout_seconds: int = tuning(3, ge=2, le=300)
    db_keepalives_idle_seconds: int = tuning(3, ge=1, le=7200)
    db_keepalives_interval_seconds: int = tuning(1, ge=1, le=600)
    db_keepalives_count: int = tuning(3, ge=1, le=100)
    db_tcp_user_timeout_seconds: int = tuning(5, ge=0, le=3600)
    # How long a request waits for the database — a pooled connection, and retries after a lost
    # one — before it answers 503 database_unavailable (Retry-After) instead.
    db_unavailable_after_seconds: float = tuning(5.0, gt=0, le=120)
    # The database probe of /readyz (the service's and the relay's): unanswered this long, 503.
    ready_check_timeout_seconds: float = tuning(2.0, gt=0, le=60)
    # Behind a transaction pooler without LISTEN_DATABASE_URL: how often each service process
    # looks for projection changes other processes committed (an event's extra delay at most).
    projection_poll_seconds: float = tuning(1.0, ge=0.05, le=60)
    # Wake-ups other processes' NOTIFYs ask for, coalesced to at most one per this interval for each
    # conversation and one for all of them (any role that may connect may NOTIFY; 0: no bound).
    projection_wake_interval_seconds: float = tuning(0.25, ge=0, le=60)
    request_max_body_bytes: int = tuning(65536, ge=1024, le=10 * 1024 * 1024)
    # Persons' sessions on the Host API, minted by the Host backend (POST /v1/host/sessions) and
    # signed with their own secret, never derived from HOST_TOKEN. Unset: minting answers 503.
    host_session_secret: str | None = common(None, min_length=32, secret=True)
    # The key of the MCP App View's tokens (service.mcp.view_tokens): one, or several separated by
    # spaces while one rotates (the first signs, each verifies), each >= 32 characters. Unset: a
    # key derived from HOST_SESSION_SECRET; neither: the View's tools answer mcp_apps_disabled.
    mcp_app_secret: str | None = common(None, secret=True)
    # The key of SEP-2322's requestState (service.mcp.input_required): one, or several separated by
    # spaces while one rotates (the first seals, each opens), each >= 32 characters; every replica
    # needs the same. Unset: a key derived from HOST_SESSION_SECRET; neither: no input is asked.
    mcp_request_state_secret: str | None = common(None, secret=True)
    # How long a requestState stays good: a retry after that is -32602 (the call is started again).
    mcp_request_state_ttl_seconds: float = tuning(600.0, ge=10, le=86400)
    # Whether the host page's sign-in also takes HOST_TOKEN itself (a session reaching every
    # conversation): for one person on their own machine (dev), never for a shared deployment.
    host_token_sign_in: bool = development(False)
    # Cookies are Secure (and named __Host-…); off only for plain http on 127.0.0.1 (dev).
    cookie_secure: bool = common(True)
    # The origin browsers reach the service at (https://host[:port]), named in the MiniApp pages'
    # Content-Security-Policy; taken from configuration, never from a request's Host header.
    public_origin: str | None = common(None)
    # Host names the token-less endpoints (/metrics, /healthz, /readyz, the sign-in pages of /host/
    # and /ops/) answer to beside PUBLIC_ORIGIN's host, localhost and IP literals (service.host_names):
    # names separated by spaces or commas, "*.example.com" for every name under it, "*" for any.
    allowed_hosts: str | None = common(None)
    # Event streams open at once: per person's session, and in all on one process.
    sse_streams_per_session: int = tuning(8, ge=1, le=1000)
    sse_streams_total: int = tuning(1000, ge=1, le=100000)
    # How often a process asks the database whether the sessions of its open streams still are:
    # a session ended on another replica stops its streams here within this many seconds.
    sse_session_check_seconds: float = tuning(5.0, ge=0.05, le=60)
    # SDK capabilities one person's session may mint (each lives only as long as that session).
    capabilities_per_session: int = tuning(1000, ge=1, le=100000)
    # Writes on the Host API per conversation and per person's session in each window of
    # WRITE_LIMIT_WINDOW_SECONDS, counted in the database (every replica shares them); past one,
    # 429 too_many_requests with Retry-After. Far above what a person types or clicks.
    write_limit_window_seconds: int = tuning(60, ge=1, le=86400)
    write_limit_messages: int = tuning(120, ge=1, le=1_000_000)
    write_limit_message_bytes: int = tuning(1_048_576, ge=8000, le=1_073_741_824)
    write_limit_surface_events: int = tuning(120, ge=1, le=1_000_000)
    write_limit_instance_opens: int = tuning(30, ge=1, le=1_000_000)
    # Tool calls a person makes over MCP, per conversation and per person in each window (then 429
    # too_many_requests with Retry-After), counted in the call's own statement (service.use_cases.callers).
    write_limit_tool_calls: int = tuning(30, ge=1, le=1_000_000)
    # The Agent's own budget of tool calls per conversation in each window; 0: none (the Agent is
    # trusted, and its calls then spend nothing).
    agent_tool_call_limit: int = common(0, ge=0, le=1_000_000)
    # interact.ask questions waiting for the person in one conversation (then 429).
    interact_pending_per_conversation: int = tuning(100, ge=1, le=100000)
    # The interactive API pages (/schema/swagger, self-hosted); the JSON and YAML documents are
    # always served.
    api_docs_ui: bool = common(False)
    # Where an operator opens a trace (Jaeger, Tempo, Grafana): a URL with {trace_id} in it, which
    # the console's trace page and `ops trace` fill with the call's trace id (docs/tracing.md).
    trace_url_template: str | None = common(None)
    # The deadline sweeper of ``serve``: claimers settling due rows side by side (SKIP LOCKED),
    # rows per settle statement, and the poll that finds deadlines other replicas opened.
    sweeper_claimers: int = tuning(2, ge=1, le=16)
    sweeper_batch_size: int = tuning(200, ge=1, le=5000)
    sweeper_poll_seconds: float = tuning(1.0, ge=0.05, le=60)
    # History retention (service/use_cases/history_retention.py): finished operations, their
    # instances, messages, surface events, answered interactions and recorded answers older than
    # this go (an expired answer keeps its fingerprint: a replay is refused, never run again).
    history_retention_days: int = common(90, ge=1, le=36500)
    # The relay (``python -m relay``).
    relay_poll_only: bool = tuning(False)  # for connection poolers that drop LISTEN
    relay_poll_interval_seconds: float = tuning(1.0, ge=0.01, le=60)
    relay_concurrency: int = tuning(64, ge=1, le=1024)
    relay_batch_size: int = tuning(100, ge=1, le=1000)
    # Default max(30, 3 x RELAY_TIMEOUT_SECONDS), the contract's value; lower it only in tests.
    relay_lease_seconds: float | None = tuning(None, gt=0, le=86400)
    relay_metrics_host: str = common("127.0.0.1")
    # Off unless set: relays on one host must never collide on a default port. 0 is off too.
    relay_metrics_port: int | None = common(None, ge=0, le=65535)
    relay_retention_days: int = common(7, ge=1, le=3650)
    # Dead rows are kept longer than delivered ones: each is a result the Agent never got. 0: kept.
    relay_dead_retention_days: int = common(30, ge=0, le=3650)
    # The endpoint's circuit (relay.circuit): endpoint failures in a row that open it, and the
    # time between probes while it is open (a Retry-After may ask for longer).
    relay_circuit_failures: int = tuning(10, ge=1, le=10000)
    relay_circuit_probe_seconds: float = tuning(5.0, ge=0.05, le=3600)
    relay_shutdown_grace_seconds: float = tuning(5.0, ge=0, le=300)
    relay_id: str | None = common(None, min_length=1, max_length=200)
    # MCP authorization (docs/api.md): the service as an OAuth 2.1 resource server. Off unless
    # MCP_OAUTH_ISSUER is set; then persons' access tokens (JWTs of these issuers, for the resource
    # MCP_RESOURCE_URL, holding every scope of MCP_OAUTH_SCOPES) are taken beside AGENT_TOKEN.
    mcp_oauth_issuer: str | None = common(None)  # one issuer URL, or several separated by spaces or commas
    mcp_resource_url: str | None = common(None)  # default: PUBLIC_ORIGIN + /mcp
    mcp_oauth_scopes: str | None = common(None)  # scopes every token must hold, separated by spaces or commas
    # Leeway for exp/nbf against the authorization server's clock.
    mcp_oauth_clock_skew_seconds: int = tuning(30, ge=0, le=600)
    # Browser origins that may call /mcp (CORS); PUBLIC_ORIGIN always may. Absent Origin: allowed.
    mcp_allowed_origins: str | None = common(None)
    # MCP sessions (handshake-era, kept in this process's memory; service.mcp.sessions): at most
    # MCP_MAX_SESSIONS open at once, of which persons together never hold the last
    # MCP_AGENT_RESERVED_SESSIONS; at most so many per person (issuer, subject, client) and per
    # Agent token (past it: 429); a person's session ends after so long without a request.
    mcp_max_sessions: int = tuning(2000, ge=1, le=100_000)
    mcp_agent_reserved_sessions: int = tuning(500, ge=0, le=100_000)
    mcp_sessions_per_person: int = tuning(8, ge=1, le=10_000)
    mcp_sessions_per_agent_token: int = tuning(1000, ge=1, le=100_000)
    mcp_person_session_idle_seconds: float = tuning(300.0, gt=0, le=86_400)
    mcp_agent_session_idle_seconds: float = tuning(1800.0, gt=0, le=86_400)
    # Set by `python -m service dev` for the processes it starts: its secrets are made at random
    # (or chosen by the person on their own machine), so the deployment checks of secrets are off.
    lineup_dev_stack: bool = development(False)
    # The database roles (service.db.roles, docs/operations.md "Database roles"): their names, and
    # for `python -m service roles` the password each one logs in with (unset: none is set or
    # changed; the role may log in some other way, or keeps the one it has).
    db_owner_role: str = roles("lineup_owner", min_length=1, max_length=63)
    db_runtime_role: str = roles("lineup_runtime", min_length=1, max_length=63)
    db_relay_role: str = roles("lineup_relay", min_length=1, max_length=63)
    db_reader_role: str = roles("lineup_reader", min_length=1, max_length=63)
    db_owner_password: str | None = roles(None, secret=True)
    db_runtime_password: str | None = roles(None, secret=True)
    db_relay_password: str | None = roles(None, secret=True)
    db_reader_password: str | None = roles(None, secret=True)
    # Each role's limits as `python -m service roles` sets them (service.db.roles.DEFAULT_LIMITS):
    # "<role>.<limit>=<value>" items, e.g. "runtime.connection_limit=600 reader.statement_timeout=5min".
    db_role_limits: str | None = roles(None)
    # How long `migrate` keeps trying its first connection (the database may still be starting).
    migrate_connect_seconds: float = common(60.0, ge=0, le=3600)
    # How long `roles` keeps trying its first connection (the same, for the step before migrate).
    roles_connect_seconds: float = common(60.0, ge=0, le=3600)

    @field_validator("database_url", "listen_database_url")
    @classmethod
    def _postgres_url(cls, value: str | None) -> str | None:
        if value is None or value == "":
            return None
        urls.parse(value)  # one host or several (h1:5432,h2:5432); ValueError says what is wrong
        return value

    @field_validator("agent_token", "host_token", "operator_token", "metrics_token")
    @classmethod
    def _token_strength(cls, value: str | None) -> str | None:
        if value is None or value == "":
            return None
        for token in split_tokens(value):
            if len(token) < 16:
                raise ValueError("every token must be at least 16 characters")
        return value

    @field_validator("mcp_app_secret", "mcp_request_state_secret")
    @classmethod
    def _app_secrets(cls, value: str | None) -> str | None:
        if value is None or value == "":
            return None
        if any(len(secret) < 32 for secret in split_tokens(value)):
            raise ValueError("every secret must be at least 32 characters")
        return value

    @field_validator("public_origin")
    @classmethod
    def _origin(cls, value: str | None) -> str | None:
        if value is None or value == "":
            return None
        return _as_origin(value)

    @field_validator("trace_url_template")
    @classmethod
    def _trace_url(cls, value: str | None) -> str | None:
        if value is None or value.strip() == "":
            return None
        value = value.strip()
        if "{trace_id}" not in value:
            raise ValueError("must contain {trace_id}, e.g. http://jaeger:16686/trace/{trace_id}")
        parts = urlsplit(value.replace("{trace_id}", "0"))
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{value!r} must be an http:// or https:// URL with {{trace_id}} in it")
        return value

    @field_validator("mcp_oauth_issuer", "mcp_resource_url")
    @classmethod
    def _urls(cls, value: str | None) -> str | None:
        if value is None or value == "":
            return None
        for url in split_tokens(value):
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
                raise ValueError(f"{url!r} must be an http:// or https:// URL without query or fragment")
        return value

    @field_validator("allowed_hosts")
    @classmethod
    def _host_names(cls, value: str | None) -> str | None:
        if value is None or value == "":
            return None
        for name in split_tokens(value):
            if (
                "/" in name
                or "@" in name
                or (name.startswith("*") and name != "*" and not name.startswith("*."))
            ):
                raise ValueError(f"{name!r} must be a host name (example.com, *.example.com) or *")
        return value

    @field_validator("db_role_limits")
    @classmethod
    def _role_limits(cls, value: str | None) -> str | None:
        if value is None or value == "":
            return None
        from service.db.role_limits import parse_limits  # imports nothing of the service

        parse_limits(value)  # ValueError says what is wrong
        return value

    @field_validator("mcp_oauth_issuer")
    @classmethod
    def _https_issuers(cls, value: str | None) -> str | None:
        # An issuer's keys decide who may call: fetched over plain http anyone on the path could
        # swap them. Plain http only on loopback (a provider on the same machine, the tests').
        for url in split_tokens(value):
            if not is_https_or_loopback(url):
                raise ValueError(f"{url!r} must be https:// (http:// only on loopback)")
        return value

    @field_validator("mcp_allowed_origins")
    @classmethod
    def _origins(cls, value: str | None) -> str | None:
        if value is None or value == "":
            return None
        return " ".join(_as_origin(origin) for origin in split_tokens(value))

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

    @field_validator("app_folders")
    @classmethod
    def _app_folders(cls, value: str | None) -> str | None:
        for folder in split_folders(value):
            if not (folder / MANIFEST).is_file():
                raise ValueError(f"{folder} is not an app folder (no {MANIFEST})")
        return value

    @property
    def apps(self) -> tuple[Path, ...]:
        """The app folders this service runs: MANIFESTS_DIR's (in name order), then APP_FOLDERS'."""
        return (*folders(self.manifests_dir), *split_folders(self.app_folders))

    @property
    def psycopg_url(self) -> str:
        """The URL in the form psycopg accepts: no SQLAlchemy driver suffix, with several hosts
        ``target_session_attrs=read-write``, and the ``connection_parameters``, each unless the URL
        says otherwise (``service.db.urls``)."""
        return urls.psycopg_url(self.database_url, self.connection_parameters) if self.database_url else ""

    @property
    def connection_parameters(self) -> tuple[tuple[str, str], ...]:
        """libpq's parameters every connection gets unless its URL names them (``service.db.urls``)."""
        return (
            ("connect_timeout", str(self.db_connect_timeout_seconds)),
            ("keepalives", "1"),
            ("keepalives_idle", str(self.db_keepalives_idle_seconds)),
            ("keepalives_interval", str(self.db_keepalives_interval_seconds)),
            ("keepalives_count", str(self.db_keepalives_count)),
            ("tcp_user_timeout", str(self.db_tcp_user_timeout_seconds * 1000)),
        )

    @property
    def metrics_open(self) -> bool | None:
        """Whether GET /metrics answers without a token: True to anyone (METRICS_PUBLIC=true),
        False to no one (METRICS_PUBLIC=false or a METRICS_TOKEN set), None to peers on a private
        network only (the default)."""
        if self.metrics_public is not None:
            return self.metrics_public
        return False if self.metrics_token is not None else None

    @property
    def role_names(self) -> dict[str, str]:
        """The database roles' names by kind (owner, runtime, relay, reader)."""
        return {
            kind: str(getattr(self, f"db_{kind}_role")) for kind in ("owner", "runtime", "relay", "reader")
        }

    @property
    def role_passwords(self) -> dict[str, str | None]:
        return {
            kind: getattr(self, f"db_{kind}_password") for kind in ("owner", "runtime", "relay", "reader")
        }

    @property
    def listen_psycopg_url(self) -> str | None:
        """``LISTEN_DATABASE_URL`` in the form psycopg accepts, or None when unset."""
        if not self.listen_database_url:
            return None
        return urls.psycopg_url(self.listen_database_url, self.connection_parameters)

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

    @property
    def mcp_issuers(self) -> tuple[str, ...]:
        return split_tokens(self.mcp_oauth_issuer)

    @property
    def mcp_resource(self) -> str | None:
        """The resource URL persons' tokens must be for (RFC 8707), when MCP authorization is on."""
        if not self.mcp_issuers:
            return None
        if self.mcp_resource_url:
            return self.mcp_resource_url
        return f"{self.public_origin}/mcp" if self.public_origin else None

    @property
    def host_names(self) -> tuple[str, ...]:
        """ALLOWED_HOSTS, one name (or ``*.`` suffix) each."""
        return split_tokens(self.allowed_hosts)

    @property
    def mcp_scopes(self) -> tuple[str, ...]:
        return split_tokens(self.mcp_oauth_scopes)

    @property
    def mcp_origins(self) -> frozenset[str]:
        """Origins a browser may call /mcp from: MCP_ALLOWED_ORIGINS and PUBLIC_ORIGIN."""
        origins = set(split_tokens(self.mcp_allowed_origins))
        if self.public_origin:
            origins.add(self.public_origin)
            if self.lineup_dev_stack:
                origins |= loopback_forms(self.public_origin)
        return frozenset(origins)

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
            if self.mcp_app_secret:
                secrets["MCP_APP_SECRET"] = split_tokens(self.mcp_app_secret)
        if command == "relay":
            secrets = {"WEBHOOK_SECRET": self.webhook_secrets}
        if command == "roles":
            secrets = {
                f"DB_{kind.upper()}_PASSWORD": (value,)
                for kind in ("owner", "runtime", "relay", "reader")
                if (value := getattr(self, f"db_{kind}_password"))
            }
        if command in ("serve", "relay", "migrate", "roles") and self.database_url:
            password = urls.password(self.database_url)
            secrets["DATABASE_URL"] = (password,) if password else ()
        placeholders = [n for n, values in secrets.items() if any(PLACEHOLDER in v.lower() for v in values)]
        guessable = [
            n
            for n, values in secrets.items()
            if n not in placeholders
            and n != "DATABASE_URL"
            and not n.startswith("DB_")
            and any(_guessable(v) for v in values)
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
        signing = [("HOST_SESSION_SECRET", self.host_session_secret or "")]
        signing += [("MCP_APP_SECRET", secret) for secret in split_tokens(self.mcp_app_secret)]
        for signer, secret in ((signer, secret.lower()) for signer, secret in signing if secret):
            for name in _AUDIENCES:
                for token in secrets.get(name, ()):
                    if token.lower() in secret or secret in token.lower():
                        problems.append(f"{signer} must not be made from {name}")
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
        if self.mcp_agent_reserved_sessions >= self.mcp_max_sessions:
            raise SettingsError("MCP_AGENT_RESERVED_SESSIONS must be below MCP_MAX_SESSIONS")
        if command == "serve" and self.mcp_issuers and self.mcp_resource is None:
            raise SettingsError("MCP_OAUTH_ISSUER needs MCP_RESOURCE_URL (or PUBLIC_ORIGIN, for its /mcp)")
        if command == "relay" and self.relay_lease <= self.relay_timeout_seconds:
            raise SettingsError("RELAY_LEASE_SECONDS must exceed RELAY_TIMEOUT_SECONDS")
        return self


def _extra(name: str) -> dict[str, Any]:
    extra = Settings.model_fields[name].json_schema_extra
    return extra if isinstance(extra, dict) else {}


def group_of(name: str) -> Group | None:
    """The group of the field ``name`` (the variable ``NAME``): who needs it."""
    group = _extra(name).get("group")
    return next((g for g in GROUPS if g == group), None)


def is_secret(name: str) -> bool:
    """Whether the field ``name`` holds a secret (``python -m service settings`` masks it)."""
    return _extra(name).get("secret") is True


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

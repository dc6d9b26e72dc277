"""One settings object for every process, read from the environment.

Each command states which variables it needs; a missing or invalid one stops the process
at start with a message naming it (``SettingsError``).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

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


def _split_tokens(value: str | None) -> tuple[str, ...]:
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
    relay_max_attempts: int = Field(25, ge=1, le=1000)
    relay_backoff_base_seconds: float = Field(1.0, gt=0, le=3600)
    relay_backoff_max_seconds: float = Field(600.0, gt=0, le=86400)
    relay_timeout_seconds: float = Field(10.0, gt=0, le=300)
    manifests_dir: Path = _REPO_ROOT / "manifests"
    interrupt_late_window_seconds: int = Field(300, ge=0, le=86400)
    db_pool_size: int = Field(10, ge=1, le=200)
    request_max_body_bytes: int = Field(65536, ge=1024, le=10 * 1024 * 1024)

    @field_validator("database_url")
    @classmethod
    def _postgres_url(cls, value: str | None) -> str | None:
        if value is None or value == "":
            return None
        if not value.startswith(("postgresql://", "postgres://", "postgresql+psycopg://")):
            raise ValueError("must be a postgresql:// URL")
        return value

    @field_validator("agent_token", "host_token", "operator_token")
    @classmethod
    def _token_strength(cls, value: str | None) -> str | None:
        if value is None or value == "":
            return None
        for token in _split_tokens(value):
            if len(token) < 16:
                raise ValueError("every token must be at least 16 characters")
        return value

    @field_validator("manifests_dir")
    @classmethod
    def _existing_dir(cls, value: Path) -> Path:
        if not value.is_dir():
            raise ValueError(f"{value} is not a directory")
        return value

    @property
    def psycopg_url(self) -> str:
        """The URL in the form psycopg accepts (no SQLAlchemy driver suffix)."""
        url = self.database_url or ""
        return url.replace("postgresql+psycopg://", "postgresql://", 1)

    def tokens(self, audience: str) -> tuple[str, ...]:
        """All accepted tokens of one audience; several allow rotation."""
        return _split_tokens(getattr(self, f"{audience}_token"))

    def require(self, command: str) -> Settings:
        missing = [name for name in REQUIRED_FOR.get(command, ()) if not getattr(self, name.lower())]
        if missing:
            raise SettingsError(f"{command}: missing required environment variable(s): {', '.join(missing)}")
        if self.relay_backoff_base_seconds > self.relay_backoff_max_seconds and command == "relay":
            raise SettingsError("RELAY_BACKOFF_BASE_SECONDS must not exceed RELAY_BACKOFF_MAX_SECONDS")
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

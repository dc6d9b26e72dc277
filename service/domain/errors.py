"""Refusals: what the runtime says no to, with the contract's stable error codes.

Use cases raise these; they know nothing of HTTP. Each belongs to one kind (not found, conflict,
invalid, …) and ``service.api.errors`` alone turns a kind into a status. Every refusal reaches the
caller as ``{"error": code, "message": message, **extra}``.
"""

from __future__ import annotations

from typing import Any, ClassVar


class Refusal(Exception):  # noqa: N818 - a refusal is an answer, not a fault of the service
    code: ClassVar[str] = "refused"

    def __init__(self, message: str, *, code: str | None = None, **extra: Any) -> None:
        super().__init__(message)
        self.message = message
        self.error_code = code or self.code
        self.extra = extra

    def body(self) -> dict[str, Any]:
        return {"error": self.error_code, "message": self.message, **self.extra}


# --- kinds ------------------------------------------------------------------------------------


class Malformed(Refusal):
    """The request cannot be read at all (not JSON, nested too deeply)."""

    code = "malformed_json"


class Unauthenticated(Refusal):
    code = "unauthorized"

    def __init__(self, message: str = "a valid bearer token for this API is required") -> None:
        super().__init__(message)


class Forbidden(Refusal):
    code = "forbidden"


class NotFound(Refusal):
    """Unknown ids answer as if they did not exist: ``unknown_<what>``."""

    code = "not_found"

    @classmethod
    def of(cls, what: str) -> NotFound:
        return cls(f"no such {what.replace('_', ' ')}", code=f"unknown_{what}")


class Misdirected(Refusal):
    """The request names a ``Host`` this endpoint does not answer to (``service.host_names``)."""

    code = "misdirected_request"


class Conflict(Refusal):
    """The request is well formed but the state it meets refuses it."""

    code = "conflict"


class Gone(Refusal):
    """What was asked for existed once and is no longer kept (history retention)."""

    code = "gone"


class TooLarge(Refusal):
    code = "too_large"


class Invalid(Refusal):
    """The request has the wrong shape or values; ``details`` lists ``{"path", "message"}``."""

    code = "invalid_request"


class TooMany(Refusal):
    """The caller has too much open at once (for example event streams)."""

    code = "too_many_requests"


class WriteLimited(TooMany):
    """A principal wrote as much as its window allows; the same write may succeed after
    ``retry_after`` seconds."""

    def __init__(self, message: str, *, retry_after: int, **extra: Any) -> None:
        super().__init__(message, **extra)
        self.retry_after = retry_after


class Unavailable(Refusal):
    """Not now: the caller may retry (``retry_after`` seconds, when known)."""

    code = "unavailable"

    def __init__(self, message: str, *, retry_after: int | None = None, **extra: Any) -> None:
        super().__init__(message, **extra)
        self.retry_after = retry_after


# --- the refusals the contract names ------------------------------------------------------------


class InvalidRequest(Invalid):
    code = "invalid_request"

    @classmethod
    def at(cls, path: str, message: str, summary: str | None = None) -> InvalidRequest:
        return cls(summary or f"invalid {path}: {message}", details=[{"path": path, "message": message}])


class InvalidArguments(Invalid):
    code = "invalid_arguments"


class InvalidAnswer(Invalid):
    code = "invalid_answer"


class StateSchemaViolation(Invalid):
    code = "state_schema_violation"


class UnknownTool(NotFound):
    code = "unknown_tool"


class UnknownApp(NotFound):
    code = "unknown_app"


class AppNotResumable(Conflict):
    code = "app_not_resumable"


class SubSessionEnded(Conflict):
    code = "sub_session_ended"

    def __init__(self) -> None:
        super().__init__("this sub-session has ended; it is read-only")


class StateReadonly(Conflict):
    code = "state_readonly"

    def __init__(self) -> None:
        super().__init__("the instance is closed: its state can be read, never written")


class RevisionConflict(Conflict):
    code = "revision_conflict"


class NotDead(Conflict):
    code = "not_dead"


class AmbiguousToolCallId(Conflict):
    """A ``tool_call_id`` is unique per conversation: named alone, it matched in more than one."""

    code = "ambiguous_tool_call_id"

    def __init__(self, what: str, conversation_ids: list[str] | None = None) -> None:
        extra: dict[str, Any] = {} if conversation_ids is None else {"conversation_ids": conversation_ids}
        super().__init__(
            f"this tool_call_id names a {what} in more than one conversation: "
            "say which with ?conversation_id=",
            **extra,
        )


class StateTooLarge(TooLarge):
    code = "state_too_large"


class FeatureNotDeclared(Forbidden):
    code = "feature_not_declared"


class SessionsDisabled(Unavailable):
    code = "sessions_disabled"


def not_found(what: str) -> NotFound:
    return NotFound.of(what)


def unauthorized() -> Unauthenticated:
    return Unauthenticated()

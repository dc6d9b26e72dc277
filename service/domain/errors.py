"""Errors that reach a caller as the contract's error body."""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """``{"error": code, "message": message, **extra}`` with an HTTP status."""

    def __init__(self, status: int, code: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.extra = extra

    def body(self) -> dict[str, Any]:
        return {"error": self.code, "message": self.message, **self.extra}


def unauthorized() -> ApiError:
    return ApiError(401, "unauthorized", "a valid bearer token for this API is required")


def not_found(what: str) -> ApiError:
    return ApiError(404, f"unknown_{what}", f"no such {what.replace('_', ' ')}")

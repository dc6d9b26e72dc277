"""A transaction the server ended because it sat idle past the role's bound (its client stalled or
was cut off) is the contract's 503 ``database_unavailable``, to be sent again — never a 500."""

from __future__ import annotations

from typing import Any

import psycopg
from litestar.testing import RequestFactory

from service.app import create_app
from service.manifests import Registry
from tests.conftest import make_settings

ENDED = psycopg.errors.IdleInTransactionSessionTimeout(
    "terminating connection due to idle-in-transaction timeout"
)


def handler_for(error: Exception, registry: Registry) -> Any:
    """The app's exception handler for ``error``, found as Litestar finds it (the nearest class of its
    MRO that has one)."""
    handlers = create_app(make_settings("postgresql://nowhere/lineup"), registry).exception_handlers
    return next(handlers[cls] for cls in type(error).__mro__ if cls in handlers)


def test_a_transaction_ended_for_idling_is_a_503_and_another_internal_error_a_500(registry: Registry) -> None:
    request = RequestFactory().post("/v1/host/conversations/c/leave")
    answer = handler_for(ENDED, registry)(request, ENDED)
    assert answer.status_code == 503
    assert answer.content["error"] == "database_unavailable"
    assert answer.headers["Retry-After"] == "1"
    other = psycopg.errors.InternalError_("cache lookup failed for relation 1")
    assert handler_for(other, registry)(request, other).status_code == 500

"""A transaction the server ended because it sat idle past the role's bound (its client stalled or
was cut off) is the contract's 503 ``database_unavailable``, to be sent again — never a 500."""

from __future__ import annotations

import psycopg
from litestar.testing import RequestFactory

from service.api.errors import internal_database_error
from service.db.reconnect import session_ended


def test_a_transaction_ended_for_idling_is_a_503_and_another_internal_error_a_500() -> None:
    request = RequestFactory().post("/v1/host/conversations/c/leave")
    ended = psycopg.errors.IdleInTransactionSessionTimeout(
        "terminating connection due to idle-in-transaction timeout"
    )
    assert session_ended(ended)
    answer = internal_database_error(request, ended)
    assert answer.status_code == 503
    assert answer.content["error"] == "database_unavailable"
    assert answer.headers["Retry-After"] == "1"
    other = psycopg.errors.InternalError_("cache lookup failed for relation 1")
    assert not session_ended(other)
    assert internal_database_error(request, other).status_code == 500

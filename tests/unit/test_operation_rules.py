"""Pure rules of the Pomodoro operation and of tool-call idempotency."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from service.domain.idempotency import canonical_json, fingerprint
from service.domain.operations import focused_seconds
from service.domain.timefmt import rfc3339

T0 = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)


@given(elapsed=st.floats(min_value=0, max_value=20000), duration=st.integers(min_value=1, max_value=14400))
def test_focused_seconds_is_whole_and_never_more_than_asked(elapsed: float, duration: int) -> None:
    value = focused_seconds(T0, T0 + timedelta(seconds=elapsed), duration)
    assert 0 <= value <= duration
    assert value == min(duration, int(elapsed))


def test_fingerprint_compares_bodies_as_json_values() -> None:
    assert fingerprint({"a": 1, "b": [1, 2]}) == fingerprint({"b": [1, 2], "a": 1})
    assert fingerprint({"a": 1}) != fingerprint({"a": 2})
    assert fingerprint({"a": "é"}) == fingerprint({"a": "\u00e9"})


_JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(st.characters(codec=None, exclude_categories=())),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20,
)


@given(body=st.dictionaries(st.text(max_size=8), _JSON_VALUES, max_size=5))
def test_fingerprint_text_is_what_json_dumps_sorted_compact_makes(body: dict[str, object]) -> None:
    # Recorded fingerprints compare across releases: the text hashed must not change.
    expected = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert canonical_json(body) == expected


def test_rfc3339_is_utc_with_microseconds_and_z() -> None:
    moment = datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC) + timedelta(hours=0)
    assert rfc3339(moment) == "2026-01-02T03:04:05.000006Z"

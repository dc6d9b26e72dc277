"""One alphabet for the ids callers make: every accepted id travels unchanged in an HTTP header and
a URL path segment, and the document's pattern says exactly what the rule says."""

from __future__ import annotations

import re
import string
from urllib.parse import quote, urlsplit

import h11
import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.domain.ids import ID_PATTERN, is_recorded_id, is_valid_id

REFUSED = [
    "",
    "x" * 256,
    "a b",
    "a\r\nb",
    "a\tb",
    "tab\x7f",
    "é",
    "a/b",
    "a\\b",
    "50%",
    "a?b",
    "a#b",
    ".",
    "..",
]
PATH_SAFE = "".join(c for c in string.punctuation if c not in "%/?#\\")
ACCEPTED = ["call-1", "x" * 255, "...", ".a", "a.", "user@example.com", "conv:1;2", "[a]{b}|c~d^e`f'g\"h"]


@pytest.mark.parametrize("value", REFUSED)
def test_ids_that_cannot_travel_in_a_header_or_a_path_segment_are_refused(value: str) -> None:
    assert not is_valid_id(value)


@pytest.mark.parametrize("value", ACCEPTED)
def test_printable_ascii_ids_without_url_specials_are_accepted(value: str) -> None:
    assert is_valid_id(value)


@given(st.text(alphabet=st.characters(max_codepoint=0x2FF), max_size=260))
def test_the_documented_pattern_is_the_rule(value: str) -> None:
    in_pattern = re.fullmatch(ID_PATTERN, value) is not None and 1 <= len(value) <= 255
    assert in_pattern == is_valid_id(value)


@given(st.text(alphabet=string.printable + "é", min_size=1, max_size=40))
def test_an_accepted_id_is_a_header_value_and_one_path_segment_as_it_is(value: str) -> None:
    if not is_valid_id(value):
        return
    # h11 (uvicorn's parser) takes it as a header value, byte for byte.
    h11.Request(method="POST", target="/", headers=[("host", "x"), ("idempotency-key", value)])
    # In a path it stays one segment, whole (no query, fragment or further segment begins in it),
    # and not one that resolving dot segments removes.
    url = urlsplit("http://h/ops/trace/" + value)
    assert url.path == "/ops/trace/" + value and not url.query and not url.fragment
    assert value not in (".", "..")
    # And it needs no percent-encoding there: what a router decodes is what was sent.
    assert quote(value, safe=PATH_SAFE) == value


def test_an_id_of_the_earlier_rule_may_still_name_what_was_recorded() -> None:
    assert is_recorded_id("conv 1") and is_recorded_id("a\r\nb") and is_recorded_id("é/..")
    assert not is_recorded_id("a\x00") and not is_recorded_id("\ud800") and not is_recorded_id("")

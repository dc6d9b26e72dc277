"""The ids callers make — ``tool_call_id`` and ``conversation_id`` — and the one alphabet they use.

An accepted id must travel unchanged in an HTTP header (the relay's ``Idempotency-Key``) and as a
URL path segment (the Host API, the console's trace page): 1-255 printable ASCII characters
(``!`` to ``~``) other than ``/``, ``\\``, ``%``, ``?`` and ``#``, and neither ``.`` nor ``..``
(which a URL resolves away). So no whitespace, no control character, nothing outside ASCII.

Ids recorded under the earlier rule (any 1-255 characters but U+0000) are kept as they are:
whatever names something that may already exist — a path that reads, a lookup, a filter — takes
``is_recorded_id``; whatever makes a new id part of the record takes ``is_valid_id``.
"""

from __future__ import annotations

from typing import TypeGuard

MAX_ID_LENGTH = 255
#: Characters of printable ASCII an id may not hold: they mean something in a URL.
URL_SPECIAL = "/\\%?#"
_FORBIDDEN = frozenset(URL_SPECIAL)
#: The rule as a JSON Schema ``pattern`` (without look-ahead, which not every engine has): some
#: character other than a dot, or three dots or more. The length is ``minLength``/``maxLength``.
_ID_CHAR = r'[!"$&-.0->@-\[\]-~]'
_NOT_DOT = r'[!"$&-\-0->@-\[\]-~]'
ID_PATTERN = rf"^(?:{_ID_CHAR}*{_NOT_DOT}{_ID_CHAR}*|\.{{3,}})$"
#: The rule for a person, as error messages say it.
ID_RULE = "1-255 printable ASCII characters without spaces, / \\ % ? or #, and not . or .."


def is_valid_id(value: object) -> TypeGuard[str]:
    """A new conversation_id or tool_call_id: one that can travel in a header and a URL path."""
    return (
        isinstance(value, str)
        and 1 <= len(value) <= MAX_ID_LENGTH
        and value.isascii()
        and value.isprintable()
        and " " not in value
        and _FORBIDDEN.isdisjoint(value)
        and value not in (".", "..")
    )


def is_recorded_id(value: object) -> TypeGuard[str]:
    """An id that may name something recorded, under this rule or the earlier one: 1-255
    characters, no U+0000 (Postgres text cannot hold it), nothing UTF-8 cannot encode."""
    if not (isinstance(value, str) and 1 <= len(value) <= MAX_ID_LENGTH and "\x00" not in value):
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True

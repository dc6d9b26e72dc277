"""JSON Schema violations as the contract's error details: ``{"path", "message"}`` each, one per
offending property where the schema says which, and never a huge value echoed back whole.

Valid instances are the common case (every accepted tool call), and ``jsonschema`` walks a schema
keyword by keyword through its generic machinery (about a tenth of a tool call's Python). So a
schema made only of the keywords ``_compile`` knows is also compiled once into a plain check, which
answers "valid" without ``jsonschema``; only an instance it does not pass is handed to ``jsonschema``,
which then finds and words the errors exactly as before. The check is sound, never lenient: it
passes only what the schema passes (a test holds it to ``jsonschema`` on the same instances), and a
schema with any other keyword has no check and always goes to ``jsonschema``.
"""

from __future__ import annotations

import json
import re
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

_MAX_ECHO = 80
_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


@dataclass(frozen=True)
class ErrorDetail:
    path: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"path": self.path, "message": self.message}


def validate(validator: Draft202012Validator, instance: object, prefix: str) -> list[ErrorDetail]:
    if not isinstance(instance, dict):
        return [ErrorDetail(prefix, "must be an object")]
    check = _check_of(validator)
    if check is not None and check(instance):
        return []
    details: set[ErrorDetail] = set()
    for error in validator.iter_errors(instance):
        details.update(_details(error, prefix))
    return sorted(details, key=lambda d: (d.path, d.message))


def _details(error: ValidationError, prefix: str) -> Iterable[ErrorDetail]:
    here = json_path(prefix, error.absolute_path)
    instance: Any = error.instance
    schema: Any = error.schema
    if error.validator == "additionalProperties" and error.validator_value is False:
        declared = schema.get("properties", {})
        patterns = schema.get("patternProperties", {})
        return [
            ErrorDetail(json_path(here, [name]), "unexpected property")
            for name in instance
            if name not in declared and not any(re.search(p, name) for p in patterns)
        ]
    if error.validator == "maxProperties" and error.validator_value == 0:
        return [ErrorDetail(json_path(here, [name]), "unexpected property") for name in instance]
    if error.validator == "required":
        required: Any = error.validator_value
        return [
            ErrorDetail(json_path(here, [name]), "is required") for name in required if name not in instance
        ]
    return [ErrorDetail(here, _shorten_instance(error.message, instance))]


def _shorten_instance(message: str, instance: object) -> str:
    # jsonschema messages start with repr(instance): never echo a huge argument back whole.
    shown = repr(instance)
    if len(shown) <= _MAX_ECHO or not message.startswith(shown):
        return message
    return shown[: _MAX_ECHO - 3] + "..." + message[len(shown) :]


def json_path(prefix: str, elements: Iterable[str | int]) -> str:
    """`$.tools[0].kind`, `arguments.duration_seconds`; odd keys as `["app.instance-state.v1"]`."""
    path = prefix
    for element in elements:
        if isinstance(element, int):
            path += f"[{element}]"
        elif _PLAIN_KEY.match(element):
            path += f".{element}"
        else:
            path += f"[{json.dumps(element, ensure_ascii=False)}]"
    return path


Check = Callable[[Any], bool]
# Per live validator (made once per manifest's tool or state schema), by id (validators are not
# hashable): a weak reference to it, and its compiled check or None.
_checks: dict[int, tuple[weakref.ref[Draft202012Validator], Check | None]] = {}


def _check_of(validator: Draft202012Validator) -> Check | None:
    key = id(validator)
    entry = _checks.get(key)
    if entry is None or entry[0]() is not validator:
        # The entry goes when its validator does (before its id can be another's).
        gone = weakref.ref(validator, lambda _: _checks.pop(key, None))
        entry = _checks[key] = (gone, _compile(validator.schema))
    return entry[1]


# Keywords that assert nothing: a schema may carry them and still be compiled.
_ANNOTATIONS = frozenset({"description", "title", "examples", "default", "$comment", "deprecated"})


# The types decoded JSON is made of. A keyword that does not apply to one of them passes it (as in
# jsonschema); a value of any other type (a subclass, a Decimal) fails every check, so jsonschema
# decides about it.
_PLAIN = frozenset({dict, list, str, int, float, bool, type(None)})


def _is_integer(value: Any) -> bool:
    # JSON Schema's integer: any number with a zero fractional part (1500.0 too), never a boolean.
    return (type(value) is int) or (type(value) is float and value.is_integer())


def _is_number(value: Any) -> bool:
    return type(value) is int or type(value) is float


_TYPES: dict[str, Check] = {
    "object": lambda v: type(v) is dict,
    "string": lambda v: type(v) is str,
    "integer": _is_integer,
    "number": _is_number,
    "boolean": lambda v: type(v) is bool,
    "array": lambda v: type(v) is list,
    "null": lambda v: v is None,
}


def _compile(schema: Any) -> Check | None:
    """A check that passes exactly what ``schema`` passes, or None when ``schema`` uses a keyword
    (or a form of one) not handled here. Instances are decoded JSON: dict, list, str, int, float,
    bool, None."""
    if schema is True:
        return lambda _: True
    if not isinstance(schema, dict) or not set(schema) <= _KEYWORDS:
        return None
    checks: list[Check] = []
    kind = schema.get("type")
    if kind is not None:
        if not isinstance(kind, str) or kind not in _TYPES:
            return None
        checks.append(_TYPES[kind])
    for keyword, value in schema.items():
        if keyword in _ANNOTATIONS or keyword == "type":
            continue
        check = _KEYWORD_CHECKS[keyword](value, schema)
        if check is None:
            return None
        checks.append(check)
    if not checks:
        return lambda _: True
    if len(checks) == 1:
        return checks[0]
    every = tuple(checks)

    def check_all(v: Any) -> bool:
        for check in every:  # noqa: SIM110 - a loop, not all() over a generator: on every tool call
            if not check(v):
                return False
        return True

    return check_all


def _count(value: Any) -> int | None:
    return value if type(value) is int and value >= 0 else None


def _bound(value: Any) -> float | int | None:
    return value if _is_number(value) else None


def _properties(value: Any, schema: dict[str, Any]) -> Check | None:
    if not isinstance(value, dict):
        return None
    compiled = {name: _compile(sub) for name, sub in value.items()}
    if any(check is None for check in compiled.values()):
        return None
    pairs = tuple(compiled.items())

    def check(v: Any) -> bool:
        if type(v) is not dict:
            return type(v) in _PLAIN
        for name, sub in pairs:  # noqa: SIM110 - as above
            if name in v and not sub(v[name]):  # type: ignore[misc]
                return False
        return True

    return check


def _additional(value: Any, schema: dict[str, Any]) -> Check | None:
    if value is True:
        return lambda _: True
    if value is not False or "patternProperties" in schema:
        return None
    declared = frozenset(schema.get("properties", {}))
    return lambda v: declared.issuperset(v) if type(v) is dict else type(v) in _PLAIN


def _required(value: Any, schema: dict[str, Any]) -> Check | None:
    if not isinstance(value, list) or not all(isinstance(name, str) for name in value):
        return None
    names = frozenset(value)
    return lambda v: names.issubset(v) if type(v) is dict else type(v) in _PLAIN


def _items(value: Any, schema: dict[str, Any]) -> Check | None:
    sub = _compile(value)
    if sub is None:
        return None
    return lambda v: all(sub(item) for item in v) if type(v) is list else type(v) in _PLAIN


def _length(
    limit: Callable[[int, int], bool], kind: type[Any]
) -> Callable[[Any, dict[str, Any]], Check | None]:
    def make(value: Any, schema: dict[str, Any]) -> Check | None:
        bound = _count(value)
        if bound is None:
            return None
        return lambda v: limit(len(v), bound) if type(v) is kind else type(v) in _PLAIN

    return make


def _number(limit: Callable[[Any, Any], bool]) -> Callable[[Any, dict[str, Any]], Check | None]:
    def make(value: Any, schema: dict[str, Any]) -> Check | None:
        bound = _bound(value)
        if bound is None:
            return None
        return lambda v: limit(v, bound) if _is_number(v) else type(v) in _PLAIN

    return make


_KEYWORD_CHECKS: dict[str, Callable[[Any, dict[str, Any]], Check | None]] = {
    "properties": _properties,
    "additionalProperties": _additional,
    "required": _required,
    "items": _items,
    "minLength": _length(lambda n, b: n >= b, str),
    "maxLength": _length(lambda n, b: n <= b, str),
    "minItems": _length(lambda n, b: n >= b, list),
    "maxItems": _length(lambda n, b: n <= b, list),
    "minProperties": _length(lambda n, b: n >= b, dict),
    "maxProperties": _length(lambda n, b: n <= b, dict),
    "minimum": _number(lambda v, b: v >= b),
    "maximum": _number(lambda v, b: v <= b),
    "exclusiveMinimum": _number(lambda v, b: v > b),
    "exclusiveMaximum": _number(lambda v, b: v < b),
}
_KEYWORDS = frozenset({"type", *_ANNOTATIONS, *_KEYWORD_CHECKS})

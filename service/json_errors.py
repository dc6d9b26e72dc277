"""JSON Schema violations as the contract's error details: ``{"path", "message"}`` each, one per
offending property where the schema says which, and never a huge value echoed back whole."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
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

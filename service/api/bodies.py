"""Request bodies: JSON parsing and shape checks that answer with the contract's errors."""

from __future__ import annotations

from typing import Annotated, Any, TypeVar

import msgspec
from litestar import Request
from pydantic import BaseModel, ConfigDict, StringConstraints, ValidationError

from service.domain.errors import InvalidRequest, Malformed

ModelT = TypeVar("ModelT", bound=BaseModel)

Id = Annotated[str, StringConstraints(min_length=1, max_length=255)]


class StrictBody(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class ToolCallBody(StrictBody):
    tool_call_id: Id
    conversation_id: Id
    tool: Annotated[str, StringConstraints(min_length=1, max_length=255)]
    arguments: dict[str, Any]


def _path(location: tuple[int | str, ...]) -> str:
    path = ""
    for part in location:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path or "$"


def _nul_paths(value: Any, path: str = "") -> list[str]:
    if isinstance(value, str):
        return [path or "$"] if "\x00" in value else []
    if isinstance(value, dict):
        found = []
        for key, item in value.items():
            key_path = f"{path}.{key}" if path else str(key)
            if "\x00" in key:
                found.append(key_path)
            found += _nul_paths(item, key_path)
        return found
    if isinstance(value, list):
        return [p for i, item in enumerate(value) for p in _nul_paths(item, f"{path}[{i}]")]
    return []


def parse_json(raw: bytes) -> Any:
    """Decode a body; not JSON → 400 ``malformed_json``; a U+0000 in any string → 422."""
    try:
        data = msgspec.json.decode(raw)
    except msgspec.DecodeError as exc:
        raise Malformed(f"the request body is not JSON: {exc}") from None
    except RecursionError:
        raise Malformed("the request body is nested too deeply") from None
    if b"\\u0000" in raw:
        try:
            paths = _nul_paths(data)
        except RecursionError:
            raise Malformed("the request body is nested too deeply") from None
        if paths:
            raise InvalidRequest(
                "strings may not contain U+0000",
                details=[{"path": p, "message": "contains U+0000"} for p in paths],
            )
    return data


def validate(model: type[ModelT], data: Any) -> ModelT:
    """Check a decoded body against its model; unknown fields and wrong types → 422."""
    if not isinstance(data, dict):
        raise InvalidRequest(
            "the request body must be a JSON object",
            details=[{"path": "$", "message": "must be an object"}],
        )
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        details = [{"path": _path(error["loc"]), "message": error["msg"]} for error in exc.errors()]
        raise InvalidRequest("the request body has the wrong shape", details=details) from None


async def read(request: Request[Any, Any, Any], model: type[ModelT]) -> tuple[ModelT, Any]:
    """The validated model and the decoded JSON it came from."""
    data = parse_json(await request.body())
    return validate(model, data), data

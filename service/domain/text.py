"""Rules for text the runtime accepts."""

from __future__ import annotations

from typing import Any


def nul_paths(value: Any, path: str = "") -> list[str]:
    """Where a JSON value holds U+0000, in a key or a string (Postgres text cannot store it), as
    ``a.b[2]`` paths under ``path`` (the root is ``$``)."""
    if isinstance(value, str):
        return [path or "$"] if "\x00" in value else []
    if isinstance(value, dict):
        found = []
        for key, item in value.items():
            key_path = f"{path}.{key}" if path else str(key)
            if "\x00" in key:
                found.append(key_path)
            found += nul_paths(item, key_path)
        return found
    if isinstance(value, list):
        return [p for i, item in enumerate(value) for p in nul_paths(item, f"{path}[{i}]")]
    return []

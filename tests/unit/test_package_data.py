"""The wheel carries every file the service reads at run time: each MiniApp's folder (its manifest,
its decision SQL, its page), the database code, the console's and the Web Host's files. A file
added beside the code but missing from ``[tool.setuptools.package-data]`` would load from a
checkout and be absent from an installed release."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NOT_READ = {".py", ".pyc", ".md"}  # code (packaged as such) and notes for readers


def _shipped(package: str, patterns: list[str]) -> set[Path]:
    return {path for pattern in patterns for path in (ROOT / package).glob(pattern) if path.is_file()}


def test_every_file_the_service_and_the_web_host_read_is_package_data() -> None:
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    for package in ("service", "web_host"):
        needed = {
            path
            for path in (ROOT / package).rglob("*")
            if path.is_file() and path.suffix not in NOT_READ and "__pycache__" not in path.parts
        }
        assert needed, package
        missing = sorted(str(p.relative_to(ROOT)) for p in needed - _shipped(package, package_data[package]))
        assert missing == [], f"not in the wheel: {missing}"


def test_the_app_folders_are_package_data() -> None:
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    shipped = {str(p.relative_to(ROOT / "service")) for p in _shipped("service", package_data["service"])}
    assert {
        "apps/manifest.schema.json",
        "apps/pomodoro/manifest.json",
        "apps/pomodoro/decisions.sql",
        "apps/pomodoro/surface/index.html",
        "apps/pomodoro/surface/pomodoro.js",
        "apps/whiteboard/surface/index.html",
    } <= shipped

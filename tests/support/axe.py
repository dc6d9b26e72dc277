"""axe-core (Deque's accessibility engine, from npm) run in a page and in each of its frames.

Installed on first use into ``.cache/axe`` (git-ignored) with npm; the tests that need it skip,
saying why, only when npm is missing or cannot install it (``scripts/system-deps.sh`` installs npm).
The script is evaluated through the browser's debugging protocol, which a page's
Content-Security-Policy does not govern: the page under test is served exactly as it is.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".cache" / "axe"
PACKAGE = "axe-core@4.11.0"
#: What this suite holds every page to: no violation of these impacts.
BLOCKING = ("serious", "critical")


@cache
def source() -> str:
    script = CACHE / "node_modules" / "axe-core" / "axe.min.js"
    if not script.exists():
        npm = shutil.which("npm")
        if npm is None:
            pytest.skip("npm is not installed: the accessibility checks need axe-core from npm")
        CACHE.mkdir(parents=True, exist_ok=True)
        (CACHE / "package.json").write_text('{"private": true}\n')
        done = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", PACKAGE],
            cwd=CACHE,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if done.returncode != 0 or not script.exists():
            pytest.skip(f"npm could not install {PACKAGE}: {done.stderr[-500:]}")
    return script.read_text("utf-8")


@dataclass(frozen=True)
class Violation:
    where: str
    rule: str
    impact: str
    nodes: int
    example: str

    def __str__(self) -> str:
        return f"{self.where}: {self.rule} ({self.impact}) x{self.nodes}, e.g. {self.example}"


_RUN = """async () => {
  const results = await axe.run(document, { iframes: false, resultTypes: ["violations"] });
  return results.violations.map((v) => ({
    rule: v.id, impact: v.impact || "minor", nodes: v.nodes.length,
    example: v.nodes[0] ? `${v.nodes[0].target.join(" ")}: ${v.nodes[0].failureSummary || ""}`.slice(0, 300) : "",
  }));
}"""


def _check(target: Any, where: str) -> list[Violation]:
    if not target.evaluate("() => typeof window.axe === 'object'"):
        target.evaluate(source() + "\n;0")
    found: list[dict[str, Any]] = target.evaluate(_RUN)
    return [Violation(where, f["rule"], f["impact"], f["nodes"], f["example"]) for f in found]


def audit(page: Any, where: str) -> list[Violation]:
    """Every violation axe finds in ``page`` and in each of its frames (each checked on its own:
    a sandboxed frame has an origin of its own)."""
    found = _check(page, where)
    for frame in page.frames:
        if frame is not page.main_frame and frame.url not in ("", "about:blank"):
            found += _check(frame, f"{where} > frame {frame.url.rsplit('/', 2)[-2] or frame.url}")
    return found


def blocking(found: list[Violation]) -> list[Violation]:
    return [v for v in found if v.impact in BLOCKING]

"""Every bench still runs: each one in its smoke mode (tiny sizes, seconds) against the tests' Postgres,
so that a schema or code change that breaks a bench breaks the suite at once, and every file in
``bench/`` is part of a bench that runs here or in ``make instructions``. Nothing here reads a figure."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.database import MIGRATED_TEMPLATE, migrated_database

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"

# The benches ``make bench`` runs, each with a ``--smoke`` mode.
SMOKED = (
    "tool_cycles",
    "call_cost",
    "mcp_cost",
    "relay_drain",
    "ending_latency",
    "look_round_trips",
    "capacity",
)
# CI's ``make instructions`` (callgrind, minutes) runs these; their baselines are checked in.
INSTRUCTIONS = ("instructions_check", "db_instructions_check")


def bench_imports(module: str) -> set[str]:
    """The ``bench`` modules ``module`` imports or starts, at any depth (itself included)."""
    seen: set[str] = set()
    todo = [module]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        tree = ast.parse((BENCH / f"{name}.py").read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                if node.module == "bench":
                    todo.extend(alias.name for alias in node.names)
                elif node.module.startswith("bench."):
                    todo.append(node.module.split(".")[1])
            elif isinstance(node, ast.Import):
                todo.extend(a.name.split(".")[1] for a in node.names if a.name.startswith("bench."))
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                # a bench module started as a process of its own: ["-m", "bench.thinnest_http", ...]
                found = re.fullmatch(r"bench\.([a-z_]+)", node.value)
                if found and (BENCH / f"{found[1]}.py").exists():
                    todo.append(found[1])
    return seen


@pytest.fixture(scope="module")
def bench_template(pg_server: str) -> Iterator[str]:
    """One migrated database the benches copy instead of each migrating its own."""
    name = f"bench_template_{uuid.uuid4().hex[:12]}"
    with migrated_database(pg_server, name):
        yield name


@pytest.mark.parametrize("bench", SMOKED)
def test_the_bench_runs_in_its_smoke_mode(bench: str, pg_server: str, bench_template: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", f"bench.{bench}", "--smoke"],
        cwd=ROOT,
        env={
            **os.environ,
            "DATABASE_URL": pg_server,
            MIGRATED_TEMPLATE: bench_template,
            "PYTHONPATH": str(ROOT),
        },
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}"


def test_every_file_in_bench_is_part_of_a_bench_that_runs() -> None:
    reached = set().union(*(bench_imports(name) for name in SMOKED + INSTRUCTIONS))
    modules = {path.stem for path in BENCH.glob("*.py")} - {"__init__"}
    assert modules - reached == set()
    baselines = {path.name for path in BENCH.glob("*.json")}
    assert baselines == {"instructions_baseline.json", "db_instructions_baseline.json"}


def test_make_bench_runs_every_smoked_bench_and_make_instructions_the_checks() -> None:
    makefile = (ROOT / "Makefile").read_text()
    targets = dict(re.findall(r"^([a-z-]+):.*?\n((?:\t.*\n)+)", makefile, flags=re.MULTILINE))
    assert {name for name in SMOKED if f"-m bench.{name}" in targets["bench"]} == set(SMOKED)
    assert all(f"-m bench.{name}" in targets["instructions"] for name in INSTRUCTIONS)

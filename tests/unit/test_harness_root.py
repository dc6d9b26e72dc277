"""The harness starts processes in the checkout's root, whichever folder the checkout is in."""

from __future__ import annotations

from pathlib import Path

from harness.processes import ROOT


def test_the_harness_root_is_the_checkout_that_holds_it() -> None:
    assert Path(__file__).resolve().parents[2] == ROOT
    assert (ROOT / "pyproject.toml").is_file()
    assert (ROOT / "harness" / "processes.py").is_file()

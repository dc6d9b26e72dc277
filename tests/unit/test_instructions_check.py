"""The CI check on instructions per tool call: over 5 % above the recorded baseline fails, within it
passes, and the recorded baseline is a figure of this path."""

from __future__ import annotations

import json

from bench.instructions_check import ALLOWANCE, BASELINE, over_allowance


def test_more_than_five_percent_over_the_baseline_fails_and_within_it_passes() -> None:
    assert ALLOWANCE == 0.05
    assert not over_allowance(1_000_000, 1_000_000)
    assert not over_allowance(1_050_000, 1_000_000)
    assert over_allowance(1_050_001, 1_000_000)
    assert not over_allowance(600_000, 1_000_000)  # a saving passes (and may be recorded)


def test_the_recorded_baseline_names_its_figure_loop_and_commit() -> None:
    recorded = json.loads(BASELINE.read_text())
    assert 100_000 < recorded["python_instructions_per_tool_call"] < 10_000_000
    assert recorded["loop"] == "uvloop" and recorded["cycles"] >= 60
    assert len(recorded["commit"]) == 40

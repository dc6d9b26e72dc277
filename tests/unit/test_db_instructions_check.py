"""The CI check on database instructions per start+interrupt cycle: the same 5 % allowance as the
Python check, and the recorded baseline is a figure of a cycle."""

from __future__ import annotations

import json

from bench.db_instructions_check import ALLOWANCE, BASELINE, CYCLES, FIGURE, over_allowance


def test_a_cycle_more_than_five_percent_over_the_database_baseline_fails_and_within_it_passes() -> None:
    assert ALLOWANCE == 0.05
    assert not over_allowance(6_300_000, 6_000_000)
    assert over_allowance(6_300_001, 6_000_000)
    assert not over_allowance(4_000_000, 6_000_000)  # a saving passes (and may be recorded)


def test_the_recorded_database_baseline_names_its_figure_cycles_and_commit() -> None:
    recorded = json.loads(BASELINE.read_text())
    assert 1_000_000 < recorded[FIGURE] < 50_000_000
    assert recorded["cycles"] == CYCLES
    assert len(recorded["commit"]) == 40

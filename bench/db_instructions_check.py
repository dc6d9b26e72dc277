"""The CI check on the database's work per tool call: fails when this checkout's database
instructions per start+interrupt cycle grow by more than 5 % over the figure recorded in
``bench/db_instructions_baseline.json``. Not a timed test: instructions counted by callgrind in a
single-user backend (``bench.db_instructions``' count, this checkout only), which a loaded machine
does not change.

    .venv/bin/python -m bench.db_instructions_check            # check (``make instructions``)
    .venv/bin/python -m bench.db_instructions_check --record   # move the baseline to this checkout's figure

Moving the baseline is a decision, made on purpose: run with ``--record`` and commit the changed
``bench/db_instructions_baseline.json`` with a message saying why a cycle costs the database more
(or, after a saving, that the saving is kept). ``--sql STATEMENT`` (repeatable) runs a statement on
the migrated database before counting — what a change would cost, without making it (an index, a
trigger; never with ``--record``). Exit codes: 0 within the allowance, 1 over it, 2 when the check
cannot run (no valgrind or PostgreSQL 15's server binaries, no baseline).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from bench.instructions_check import ALLOWANCE, head_commit, over_allowance

BASELINE = Path(__file__).resolve().with_name("db_instructions_baseline.json")
CYCLES = 200  # counted twice (40 warm-up cycles, then 40 + CYCLES): about two minutes under valgrind
FIGURE = "database_instructions_per_cycle"

__all__ = ["ALLOWANCE", "BASELINE", "CYCLES", "FIGURE", "main", "over_allowance"]


def main() -> int:
    from bench.db_instructions import cycle_instructions, has_tools, migrated_cluster
    from harness.processes import ROOT

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--record", action="store_true", help="write this checkout's figure as the baseline")
    parser.add_argument("--sql", action="append", default=[], help="a statement run before counting")
    args = parser.parse_args()
    if not has_tools():
        print("db_instructions_check: needs valgrind and PostgreSQL 15's server binaries")
        return 2
    if args.record and args.sql:
        print("db_instructions_check: --record counts this checkout as it is, not with --sql")
        return 2
    if not args.record and not BASELINE.exists():
        print(f"db_instructions_check: no baseline at {BASELINE}; make one with --record")
        return 2
    began = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="lineup-db-instructions-check-"))
    os.chmod(work, 0o777)  # noqa: S103 - the server, run as postgres, writes its profiles here
    try:
        with migrated_cluster(work, {"current": ROOT}, {"current": args.sql}) as data:
            figure = cycle_instructions(data, "current", CYCLES, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    took = time.monotonic() - began
    if args.record:
        recorded = {
            FIGURE: round(figure),
            "cycles": CYCLES,
            "commit": head_commit(ROOT),
            "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        BASELINE.write_text(json.dumps(recorded, indent=2) + "\n")
        print(f"db_instructions_check: recorded {figure / 1e6:.3f} M instructions per cycle ({took:.0f} s)")
        return 0
    baseline = json.loads(BASELINE.read_text())
    ratio = figure / baseline[FIGURE]
    print(
        f"db_instructions_check: {figure / 1e6:.3f} M ({figure:,.0f}) database instructions per "
        "start+interrupt cycle, "
        f"baseline {baseline[FIGURE] / 1e6:.3f} M ({baseline['commit'][:12]}): {ratio:.3f}x, "
        f"allowed up to {1 + ALLOWANCE:.2f}x ({took:.0f} s)"
    )
    if over_allowance(figure, baseline[FIGURE]):
        print(
            "db_instructions_check: FAILED — a cycle costs the database more; find what "
            "(bench/HISTORY.md, 'The database's CI check'; bench.db_parts at be1932e) or, if the growth "
            "is meant, "
            "move the baseline: .venv/bin/python -m bench.db_instructions_check --record, and commit "
            "it saying why"
        )
        return 1
    if ratio < 1 - ALLOWANCE:
        print("db_instructions_check: well under the baseline; keep the saving with --record")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The CI check on the service's Python per tool call: fails when it grows by more than 5 % over the
figure recorded in ``bench/instructions_baseline.json``. Not a timed test: instructions counted by
callgrind (``bench.call_instructions``' driver, this checkout only, on uvloop as ``serve`` runs),
which a loaded machine does not change.

    .venv/bin/python -m bench.instructions_check            # check (``make instructions``)
    .venv/bin/python -m bench.instructions_check --record   # move the baseline to this checkout's figure

Moving the baseline is a decision, made on purpose: run with ``--record`` and commit the changed
``bench/instructions_baseline.json`` with a message saying why the path costs more (or, after a
saving, that the saving is kept). Exit codes: 0 within the allowance, 1 over it, 2 when the check
cannot run (no valgrind, no baseline).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from bench.call_instructions import per_call

BASELINE = Path(__file__).resolve().with_name("instructions_baseline.json")
ALLOWANCE = 0.05  # the check fails above baseline * 1.05
CYCLES = 300  # cycles cost little beside the start-up; more of them amortise the collector
LOOP = "uvloop"


def over_allowance(figure: float, baseline: float) -> bool:
    """Whether ``figure`` grew by more than the allowance over ``baseline``."""
    return figure > baseline * (1 + ALLOWANCE)


def head_commit(root: Path) -> str:
    done = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() or "unknown"


def main() -> int:
    from harness.database import named_server, scratch_database
    from harness.processes import ROOT
    from harness.releases import migrate_release

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--record", action="store_true", help="write this checkout's figure as the baseline")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        print("instructions_check: needs valgrind (Debian: valgrind)")
        return 2
    if not args.record and not BASELINE.exists():
        print(f"instructions_check: no baseline at {BASELINE}; make one with --record")
        return 2
    began = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="lineup-instructions-check-"))
    try:
        with scratch_database(named_server(), f"bench_check_{uuid.uuid4().hex[:8]}") as url:
            migrate_release(ROOT, url)
            figure = per_call(ROOT, url, CYCLES, work, loop=LOOP)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    took = time.monotonic() - began
    if args.record:
        recorded = {
            "python_instructions_per_tool_call": round(figure),
            "cycles": CYCLES,
            "loop": LOOP,
            "commit": head_commit(ROOT),
            "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        BASELINE.write_text(json.dumps(recorded, indent=2) + "\n")
        print(f"instructions_check: recorded {figure / 1e6:.3f} M instructions per tool call ({took:.0f} s)")
        return 0
    baseline = json.loads(BASELINE.read_text())
    ratio = figure / baseline["python_instructions_per_tool_call"]
    print(
        f"instructions_check: {figure / 1e6:.3f} M Python instructions per tool call, baseline "
        f"{baseline['python_instructions_per_tool_call'] / 1e6:.3f} M ({baseline['commit'][:12]}): "
        f"{ratio:.3f}x, allowed up to {1 + ALLOWANCE:.2f}x ({took:.0f} s)"
    )
    if over_allowance(figure, baseline["python_instructions_per_tool_call"]):
        print(
            "instructions_check: FAILED — the tool-call path grew; find what (bench/README.md, "
            "'Where the instructions go') or, if the growth is meant, move the baseline: "
            ".venv/bin/python -m bench.instructions_check --record, and commit it saying why"
        )
        return 1
    if ratio < 1 - ALLOWANCE:
        print("instructions_check: well under the baseline; keep the saving with --record")
    return 0


if __name__ == "__main__":
    sys.exit(main())

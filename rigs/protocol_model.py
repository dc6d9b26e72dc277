"""``make model``: the Promela models of ``model/`` checked by spin.

Each model must hold every property it names, and must not deadlock; each of its ``REVERT_*``
variants, which puts back a known bug, must break the property named beside it below. Exits 1
otherwise, and when a search is cut short (a depth or memory bound), since a cut search proves
nothing. See ``model/README.md``.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

MODELS = Path(__file__).resolve().parent.parent / "model"

#: Every property of each model, by its ``ltl`` name.
PROPERTIES = {
    "race.pml": ("terminal_once", "completed_kept", "never_early", "one_outbox_row"),
    "relay.pml": ("at_least_once", "conversation_order", "one_sender"),
}

#: Each revert, the model it applies to and the property it must break.
REVERTS = {
    "REVERT_OUTBOX_OUTSIDE": ("race.pml", "one_outbox_row"),
    "REVERT_NO_STATE_GUARD": ("race.pml", "terminal_once"),
    "REVERT_HOST_CLOCK": ("race.pml", "never_early"),
    "REVERT_CLAIM_NOT_EXCLUSIVE": ("relay.pml", "one_sender"),
    "REVERT_SHORT_LEASE": ("relay.pml", "conversation_order"),
    "REVERT_CLAIM_WITHOUT_FLUSH": ("relay.pml", "conversation_order"),
}

DEPTH = 200_000
CUT_SHORT = re.compile(r"max search depth too small|out of memory|search not completed", re.IGNORECASE)


@dataclass(frozen=True)
class Verdict:
    model: str
    variant: str
    check: str
    errors: int
    states: int
    seconds: float


def compile_pan(model: Path, work: Path, variant: str | None, *flags: str) -> Path:
    """``spin -a`` of ``model`` (with ``-D<variant>``) and ``pan`` built from it in ``work``."""
    work.mkdir(parents=True, exist_ok=True)
    source = work / model.name
    shutil.copyfile(model, source)
    define = [f"-D{variant}"] if variant else []
    subprocess.run(["spin", "-a", *define, source.name], cwd=work, check=True, capture_output=True)
    pan = work / "pan"
    subprocess.run(["cc", "-O2", "-w", *flags, "-o", str(pan), "pan.c"], cwd=work, check=True)
    return pan


def search(pan: Path, *args: str) -> tuple[int, int, float]:
    """Runs ``pan``: its error count and stored states; a cut search is an error of the rig."""
    started = time.perf_counter()
    done = subprocess.run([str(pan), f"-m{DEPTH}", *args], cwd=pan.parent, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    errors = re.search(r"errors: (\d+)", done.stdout)
    states = re.search(r"(\d+) states, stored", done.stdout)
    if errors is None or states is None:
        said = done.stdout + done.stderr
        raise SystemExit(f"{pan.parent.name} {' '.join(args)}: pan said nothing usable:\n{said}")
    # A search that found an error stops there ("Search not completed"); one that found none must
    # have covered every state.
    if int(errors.group(1)) == 0 and CUT_SHORT.search(done.stdout + done.stderr):
        raise SystemExit(f"{pan.parent.name} {' '.join(args)}: the search was cut short:\n{done.stdout}")
    return int(errors.group(1)), int(states.group(1)), seconds


def check(models: Path, work: Path) -> list[tuple[Verdict, bool]]:
    """Every check, each with whether it came out as it must."""
    results: list[tuple[Verdict, bool]] = []
    for name, properties in PROPERTIES.items():
        model = models / name
        deadlocks = compile_pan(model, work / f"{name}-deadlock", None, "-DSAFETY", "-DNOCLAIM")
        errors, states, seconds = search(deadlocks)
        results.append((Verdict(name, "-", "no deadlock", errors, states, seconds), errors == 0))
        pan = compile_pan(model, work / name, None)
        for prop in properties:
            errors, states, seconds = search(pan, "-a", "-E", "-N", prop)
            results.append((Verdict(name, "-", prop, errors, states, seconds), errors == 0))
    for variant, (name, prop) in REVERTS.items():
        pan = compile_pan(models / name, work / f"{name}-{variant}", variant)
        errors, states, seconds = search(pan, "-a", "-E", "-N", prop)
        results.append((Verdict(name, variant, prop, errors, states, seconds), errors > 0))
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=Path, default=MODELS)
    args = parser.parse_args()
    if shutil.which("spin") is None or shutil.which("cc") is None:
        print("model: needs spin and a C compiler (Debian: apt-get install spin gcc)", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="lineup-model-") as tmp:
        results = check(args.models, Path(tmp))
    print(f"{'model':<10} {'variant':<27} {'property':<19} {'errors':>6} {'states':>10} {'s':>6}  verdict")
    for v, ok in results:
        expected = "holds" if v.variant == "-" else "broken, as it must be"
        verdict = expected if ok else ("VIOLATED" if v.variant == "-" else "NOT BROKEN")
        row = f"{v.model:<10} {v.variant:<27} {v.check:<19} {v.errors:>6} {v.states:>10}"
        print(f"{row} {v.seconds:>6.1f}  {verdict}")
    failed = [v for v, ok in results if not ok]
    print(f"model: {len(results) - len(failed)} of {len(results)} checks as they must be")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

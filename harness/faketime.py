"""libfaketime (Debian's ``faketime``) for a child process: its clocks shifted or drifting while the
database's, and this process's, stay as they are (``tests/e2e/test_relay_clock.py``,
``tests/e2e/test_service_clock.py``, ``rigs/clocks.py``)."""

from __future__ import annotations

import glob
from pathlib import Path


def library() -> Path | None:
    """libfaketime's shared object, or None when it is not installed (``scripts/system-deps.sh``)."""
    found = sorted(glob.glob("/usr/lib/*/faketime/libfaketime.so.1"))
    return Path(found[0]) if found else None


def faked(spec: str, *, monotonic: bool = False) -> dict[str, str]:
    """The environment that runs a child under ``spec`` (``FAKETIME``: "+1h", "-1h", "+0 x1.2" — an
    offset, then ``x`` and the rate its clock runs at). ``monotonic``: its monotonic clock too (a
    drifting oscillator drives both); otherwise only the wall clock moves."""
    found = library()
    if found is None:
        raise RuntimeError("libfaketime is not installed (Debian: apt-get install faketime)")
    env = {"LD_PRELOAD": str(found), "FAKETIME": spec, "FAKETIME_DONT_RESET": "1"}
    if not monotonic:
        env["FAKETIME_DONT_FAKE_MONOTONIC"] = "1"
    return env

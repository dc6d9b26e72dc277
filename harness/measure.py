"""What the benches and the rigs both measure with: percentiles and CPU seconds from ``/proc``.

The benches (``bench/``) and the rigs (``rigs/``) share code only through the harness: neither
imports the other (an import-linter contract in pyproject.toml).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) with linear interpolation between closest ranks."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    if len(ordered) == 1:
        return float(ordered[0])
    rank = (len(ordered) - 1) * q / 100.0
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return float(ordered[low] + (ordered[high] - ordered[low]) * (rank - low))


_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _proc_stat(pid: int) -> list[str] | None:
    """Fields of /proc/<pid>/stat from the state field on (index 0 = field 3 of proc(5))."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw[raw.rindex(")") + 2 :].split()


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system) a process has used; 0 if it is gone."""
    fields = _proc_stat(pid)
    if fields is None:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICKS


def machine_busy() -> float:
    """Busy CPU seconds of the whole machine (all cores) since boot."""
    first = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    values = [int(v) for v in first]
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return (sum(values[:8]) - idle) / _TICKS


def load_line() -> str:
    """The machine's load as ``uptime`` states it, for the line printed beside every figure."""
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f}, {five:.2f}, {fifteen:.2f} on {os.cpu_count()} cores"

"""A unit of work's figures in ``bench.capacity``: one row per unit (from a measured window's
usage), the difference watching makes, and the report's tables."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

from bench.server_usage import Usage


@dataclass
class Row:
    """One unit of work's figures, per unit."""

    unit: str
    units: int
    service_us: float
    postgres_us: float
    backends_us: float
    background_us: float
    statements: float
    commits: float
    wal_bytes: float
    fpi_bytes: float
    rows: float
    hot_updates: float
    locks: float
    index_entries: float
    dirtied: float
    extra: dict[str, float] = field(default_factory=dict)
    tables: dict[str, dict[str, float]] = field(default_factory=dict)
    top_statements: list[tuple[str, float, float]] = field(default_factory=list)
    note: str = ""


def per_unit(unit: str, usage: Usage, units: int, note: str = "", **extra_cpu: float) -> Row:
    n = max(units, 1)
    backends = usage.cpu.get("backends", 0.0)
    background = sum(v for k, v in usage.cpu.items() if k in usage.server_parts and k != "backends")
    tables: dict[str, dict[str, float]] = {}
    for name, writes in usage.relations.items():
        table = name.split(".")[0].removesuffix(" (toast)")
        entry = tables.setdefault(table, {"rows": 0.0, "hot": 0.0, "locks": 0.0, "index": 0.0, "wal": 0.0})
        entry["rows"] += writes.rows / n
        entry["hot"] += writes.hot_updated / n
        entry["locks"] += writes.locked / n
        entry["index"] += writes.index_entries / n
        entry["wal"] += writes.wal_bytes / n
    return Row(
        unit=unit,
        units=units,
        service_us=usage.cpu.get("service", 0.0) / n * 1e6,
        postgres_us=(backends + background) / n * 1e6,
        backends_us=backends / n * 1e6,
        background_us=background / n * 1e6,
        statements=usage.calls / n,
        commits=usage.commits / n,
        wal_bytes=usage.wal_bytes / n,
        fpi_bytes=usage.fpi_bytes / n,
        rows=usage.rows / n,
        hot_updates=usage.hot_updates / n,
        locks=usage.locks / n,
        index_entries=usage.index_entries / n,
        dirtied=usage.dirtied / n,
        extra={k: v / n * 1e6 for k, v in extra_cpu.items()},
        tables=tables,
        top_statements=[
            (" ".join(s.query.split())[:80], s.calls / n, s.exec_ms / max(s.calls, 1))
            for s in usage.statements[:4]
        ],
        note=note,
    )


def difference(unit: str, watched: Row, plain: Row, note: str) -> Row:
    """What ``watched`` costs beyond ``plain`` (the same work, per unit)."""
    keys = (
        "service_us",
        "postgres_us",
        "backends_us",
        "background_us",
        "statements",
        "commits",
        "wal_bytes",
        "fpi_bytes",
        "rows",
        "hot_updates",
        "locks",
        "index_entries",
        "dirtied",
    )
    values = {key: getattr(watched, key) - getattr(plain, key) for key in keys}
    return Row(unit=unit, units=watched.units, note=note, top_statements=watched.top_statements, **values)


def rescale(row: Row, factor: float) -> Row:
    """Figures per request turned into figures per ``factor`` requests (a cycle is two calls)."""
    scaled = asdict(row)
    for key, value in scaled.items():
        if isinstance(value, float):
            scaled[key] = value * factor
    return Row(**scaled)


# --- the report ---------------------------------------------------------------------------------

COLUMNS = (
    ("service_us", "service CPU us", "{:,.0f}"),
    ("postgres_us", "Postgres CPU us", "{:,.0f}"),
    ("statements", "statements", "{:.2f}"),
    ("commits", "write xacts", "{:.2f}"),
    ("wal_bytes", "WAL bytes", "{:,.0f}"),
    ("fpi_bytes", "of it FPI", "{:,.0f}"),
    ("rows", "rows written", "{:.1f}"),
    ("hot_updates", "of them HOT", "{:.1f}"),
    ("locks", "row locks", "{:.1f}"),
    ("index_entries", "index entries", "{:.1f}"),
    ("dirtied", "buffers dirtied", "{:.1f}"),
)


def table(rows: Sequence[Row]) -> str:
    head = "| unit of work | " + " | ".join(title for _, title, _ in COLUMNS) + " |"
    rule = "| --- |" + " ---: |" * len(COLUMNS)
    lines = [head, rule]
    for row in rows:
        cells = [fmt.format(getattr(row, key)) for key, _, fmt in COLUMNS]
        lines.append(f"| {row.unit} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def details(rows: Sequence[Row]) -> str:
    out = []
    for row in rows:
        out.append(f"\n{row.unit}: {row.units} units" + (f" ({row.note})" if row.note else ""))
        out.append(
            f"    Postgres CPU {row.postgres_us:,.0f} us = backends {row.backends_us:,.0f} + background "
            f"{row.background_us:,.0f}"
            + "".join(f"; {name} process {value:,.0f} us" for name, value in row.extra.items())
        )
        for table_name, entry in sorted(row.tables.items(), key=lambda kv: -kv[1]["wal"]):
            if entry["wal"] < 1 and entry["rows"] < 0.01:
                continue
            out.append(
                f"    {table_name:<18} rows {entry['rows']:5.2f} (HOT {entry['hot']:4.2f}, locks "
                f"{entry['locks']:4.2f})  index entries {entry['index']:5.2f}  WAL {entry['wal']:7,.0f} B"
            )
        for query, calls, mean_ms in row.top_statements:
            out.append(f"    {calls:6.2f} x {mean_ms:7.3f} ms  {query}")
    return "\n".join(out)

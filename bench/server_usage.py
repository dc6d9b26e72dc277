"""What a window of work cost a Postgres server the bench started itself: CPU per process class,
WAL bytes and full-page images, rows and index entries written per relation (read back from the WAL
with ``pg_walinspect``), statements, buffers dirtied and WAL per statement (``pg_stat_statements``).

Only a server of its own gives these figures: WAL is cluster-wide, and ``pg_stat_statements`` must
be preloaded. ``UsageMeter`` needs both extensions in the server's ``postgres`` database
(``bench.measured_server.prepare_server``) and reads the measured database's relation names from
the database itself.

Rows and index entries come from WAL records, not from ``pg_stat_user_tables``: those counters
reach the shared statistics only when a backend goes idle, up to ten seconds later, while every
write is in the WAL the moment it commits.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import psycopg

from bench.measured_server import ServerCpu
from harness.measure import process_cpu

# Records that put one entry into a B-tree leaf (a split logs the new item in the split record).
INDEX_ENTRY_RECORDS = frozenset({"INSERT_LEAF", "INSERT_POST", "SPLIT_L", "SPLIT_R"})
_REL = re.compile(r"rel \d+/(\d+)/(\d+)")


class RelationWrites:
    """What one relation received in a window, from its WAL records."""

    inserted: int = 0
    updated: int = 0
    hot_updated: int = 0
    deleted: int = 0
    locked: int = 0
    index_entries: int = 0
    records: int = 0
    wal_bytes: int = 0
    fpi_bytes: int = 0

    @property
    def rows(self) -> int:
        return self.inserted + self.updated + self.hot_updated + self.deleted


@dataclass
class Statement:
    query: str
    calls: int
    dirtied: int
    wal_bytes: int
    exec_ms: float


@dataclass
class Usage:
    """A window's cost. ``cpu`` is CPU seconds per part (server process classes and any named
    processes); everything else is a count over the window."""

    seconds: float
    cpu: dict[str, float]
    wal_bytes: int
    fpi_bytes: int
    records: Counter[str]
    relations: dict[str, RelationWrites]
    statements: list[Statement]
    commits: int

    @property
    def calls(self) -> int:
        return sum(s.calls for s in self.statements)

    @property
    def dirtied(self) -> int:
        return sum(s.dirtied for s in self.statements)

    @property
    def rows(self) -> int:
        return sum(r.rows for r in self.relations.values())

    @property
    def hot_updates(self) -> int:
        return sum(r.hot_updated for r in self.relations.values())

    @property
    def locks(self) -> int:
        return sum(r.locked for r in self.relations.values())

    @property
    def index_entries(self) -> int:
        return sum(r.index_entries for r in self.relations.values())

    @property
    def postgres_cpu(self) -> float:
        return sum(v for k, v in self.cpu.items() if k in self.server_parts)

    server_parts: frozenset[str] = field(default_factory=frozenset)


class UsageMeter:
    """``start()`` then ``stop()`` around a window of work on ``database`` of a server of our own.

    ``processes`` names other processes whose CPU counts (the service, a relay). Statements whose
    text contains ``ignore_marker`` (the bench's own probes) are left out of the statement figures,
    and the backends named in ``ignore_pids`` out of the CPU.
    """

    # The last range of WAL records read, and what was read (see ``align``).
    _last_read: tuple[tuple[str, str], list[Any]] = (("", ""), [])

    def __init__(
        self,
        admin_url: str,
        database_url: str,
        database: str,
        postmaster: int,
        processes: Mapping[str, int] | None = None,
        ignore_marker: str = "bench-probe",
        ignore_pids: frozenset[int] = frozenset(),
        reset_statements: bool = True,
    ) -> None:
        self._admin_url = admin_url
        self._database_url = database_url
        self._database = database
        self._postmaster = postmaster
        self._processes = dict(processes or {})
        self._marker = ignore_marker
        self._ignore_pids = ignore_pids
        self._reset = reset_statements
        self._admin: psycopg.Connection[Any] | None = None
        self._cpu: ServerCpu | None = None
        self._named: dict[str, float] = {}
        self._lsn = ""
        self._end = ""
        self._began = 0.0
        self._seconds = 0.0
        self._spent: dict[str, float] = {}
        self._names: dict[int, str] = {}

    def _relation_names(self) -> dict[int, str]:
        """relfilenode -> relation name; an index is named ``table.index``, a TOAST table
        ``table (toast)``."""
        with psycopg.connect(self._database_url, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT c.relfilenode, c.relname, t.relname, o.relname "
                "FROM pg_class c "
                "LEFT JOIN pg_index i ON i.indexrelid = c.oid "
                "LEFT JOIN pg_class t ON t.oid = i.indrelid "
                "LEFT JOIN pg_class o ON o.reltoastrelid = c.oid "
                "WHERE c.relfilenode <> 0 AND c.relnamespace = 'public'::regnamespace "
                "   OR o.oid IS NOT NULL AND o.relnamespace = 'public'::regnamespace "
                f"/* {self._marker} */"
            ).fetchall()
        names: dict[int, str] = {}
        for node, name, table, owner in rows:
            names[int(node)] = f"{owner} (toast)" if owner else (f"{table}.{name}" if table else name)
        return names

    def start(self) -> None:
        self.prepare()
        self.begin()

    def stop(self) -> Usage:
        self.end()
        return self.report()

    # Two meters side by side (one per database of a server) take their marks at the same moments:
    # prepare both, begin both; end both, then report both.

    def prepare(self) -> None:
        """What takes time before the window: the relation names, the connection, the reset."""
        self._names = self._relation_names()
        self._admin = psycopg.connect(self._admin_url, autocommit=True)
        if self._reset:  # two meters of one server side by side: the first one resets
            self._admin.execute("SELECT pg_stat_statements_reset()")
        self._cpu = ServerCpu(self._postmaster, self._database, self._ignore_pids)

    def begin(self) -> None:
        assert self._admin is not None
        assert self._cpu is not None
        self._named = {name: process_cpu(pid) for name, pid in self._processes.items()}
        self._cpu.begin()
        row = self._admin.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()
        assert row is not None
        self._lsn = str(row[0])
        self._began = time.perf_counter()

    def align(self, other: UsageMeter) -> None:
        """Take ``other``'s WAL marks (a meter of another database of the same server, begun and
        ended just before this one): both windows then read one range of WAL, once."""
        self._lsn, self._end = other._lsn, other._end

    def end(self) -> None:
        assert self._admin is not None
        assert self._cpu is not None
        self._seconds = time.perf_counter() - self._began
        row = self._admin.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()
        assert row is not None
        self._end = str(row[0])
        self._spent = self._cpu.finish()
        for name, pid in self._processes.items():
            self._spent[name] = process_cpu(pid) - self._named[name]

    def report(self) -> Usage:
        """The window's figures, read after it closed."""
        assert self._admin is not None
        admin = self._admin
        statements = self._statements(admin)
        self._wait_flushed(admin, self._end)
        usage = self._wal(admin, self._lsn, self._end, self._seconds, self._spent, statements)
        admin.close()
        self._admin = None
        return usage

    def _statements(self, admin: psycopg.Connection[Any]) -> list[Statement]:
        rows = admin.execute(
            "SELECT query, calls, shared_blks_dirtied + local_blks_dirtied, wal_bytes, total_exec_time "
            "FROM pg_stat_statements "
            "WHERE dbid = (SELECT oid FROM pg_database WHERE datname = %s) AND query NOT LIKE %s",
            (self._database, f"%{self._marker}%"),
        ).fetchall()
        found = [Statement(str(q), int(c), int(d), int(w), float(t)) for q, c, d, w, t in rows]
        return sorted(found, key=lambda s: -s.calls)

    @staticmethod
    def _wait_flushed(admin: psycopg.Connection[Any], lsn: str) -> None:
        """pg_walinspect reads only flushed WAL; the walwriter flushes within wal_writer_delay."""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            row = admin.execute("SELECT pg_current_wal_flush_lsn() >= %s::pg_lsn", (lsn,)).fetchone()
            if row and row[0]:
                return
            time.sleep(0.05)
        raise TimeoutError(f"WAL up to {lsn} was not flushed within 10 s")

    def _wal(
        self,
        admin: psycopg.Connection[Any],
        start: str,
        end: str,
        seconds: float,
        cpu: dict[str, float],
        statements: list[Statement],
    ) -> Usage:
        size = admin.execute("SELECT %s::pg_lsn - %s::pg_lsn", (end, start)).fetchone()
        written = int(size[0]) if size else 0
        if written <= 0:
            rows: list[Any] = []
        elif UsageMeter._last_read[0] == (start, end):
            rows = UsageMeter._last_read[1]  # the same range, read for another database just now
        else:
            rows = admin.execute(
                "SELECT resource_manager, record_type, substring(block_ref from 'rel [0-9/]+') AS rel, "
                "       count(*), sum(record_length), sum(fpi_length) "
                "FROM pg_get_wal_records_info(%s::pg_lsn, %s::pg_lsn) GROUP BY 1, 2, 3",
                (start, end),
            ).fetchall()
            UsageMeter._last_read = ((start, end), rows)
        database_oid = admin.execute(
            "SELECT oid FROM pg_database WHERE datname = %s", (self._database,)
        ).fetchone()
        records: Counter[str] = Counter()
        relations: dict[str, RelationWrites] = {}
        fpi = 0
        commits = 0
        for manager, kind, rel, count, length, fpi_length in rows:
            kind = str(kind)
            records[f"{manager}/{kind}"] += int(count)
            fpi += int(fpi_length or 0)
            if manager == "Transaction" and kind.startswith("COMMIT"):
                commits += int(count)
            name = self._relation(rel, database_oid[0] if database_oid else None)
            if name is None:
                continue
            writes = relations.setdefault(name, RelationWrites())
            writes.records += int(count)
            writes.wal_bytes += int(length or 0)
            writes.fpi_bytes += int(fpi_length or 0)
            base = kind.split("+")[0]
            if manager == "Heap":
                if base == "INSERT":
                    writes.inserted += int(count)
                elif base == "UPDATE":
                    writes.updated += int(count)
                elif base == "HOT_UPDATE":
                    writes.hot_updated += int(count)
                elif base == "DELETE":
                    writes.deleted += int(count)
                elif base == "LOCK":
                    writes.locked += int(count)
            elif manager == "Heap2" and base == "MULTI_INSERT":
                writes.inserted += int(count)
            elif manager == "Btree" and base in INDEX_ENTRY_RECORDS:
                writes.index_entries += int(count)
        return Usage(
            seconds=seconds,
            cpu=cpu,
            wal_bytes=max(written, 0),
            fpi_bytes=fpi,
            records=records,
            relations=relations,
            statements=statements,
            commits=commits,
            server_parts=frozenset(k for k in cpu if k not in self._processes and k != "other databases"),
        )

    def _relation(self, rel: str | None, database_oid: int | None) -> str | None:
        if not rel:
            return None
        match = _REL.search(rel)
        if match is None or database_oid is None or int(match.group(1)) != int(database_oid):
            return None
        return self._names.get(int(match.group(2)), f"relfilenode {match.group(2)}")

"""``bench.endpoint_outage``'s checks and figures: what the run saw (an ``Outage``), read against the
outbox, its attempts and what the endpoint received."""

from __future__ import annotations

import itertools
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import psycopg

from bench.common import percentile


@dataclass
class Outage:
    """What the run saw: the endpoint's down and up times (unix), the circuit's changes as polled,
    the rows pending at recovery, the producer's finished cycles (start call id, conversation,
    when its interrupt was answered) and the relay rate of the healthy drain."""

    relay_rate: float = 0.0
    relay_rate_after: float = 0.0
    down_at: float = 0.0
    up_at: float = 0.0
    circuit: list[tuple[float, str]] = field(default_factory=list)
    backlog: set[str] = field(default_factory=set)
    production: list[tuple[str, str, float]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    producer_behind: float = 0.0
    seeded: int = 0
    probe_seconds: float = 5.0


@dataclass(frozen=True)
class Row:
    event_id: str
    tool_call_id: str
    conversation_id: str
    sequence: int
    status: str
    attempts: int


def _rows(url: str) -> tuple[dict[str, Row], list[tuple[str, float, int | None, str | None, str]]]:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT event_id::text, tool_call_id, conversation_id, sequence, status, attempts FROM outbox"
        ).fetchall()
        attempts = conn.execute(
            "SELECT event_id::text, EXTRACT(EPOCH FROM started_at)::float8, status_code, error_class, "
            "outcome FROM outbox_attempts ORDER BY started_at"
        ).fetchall()
    outbox = {str(r[0]): Row(str(r[0]), str(r[1]), str(r[2]), int(r[3]), str(r[4]), int(r[5])) for r in rows}
    return outbox, [(str(a[0]), float(a[1]), a[2], a[3], str(a[4])) for a in attempts]


def _most_within(times: list[float], span: float) -> int:
    """The most of ``times`` (sorted) in any window [t, t + span)."""
    most, low = 0, 0
    for high, at in enumerate(times):
        while at - times[low] >= span:
            low += 1
        most = max(most, high - low + 1)
    return most


def _seconds(values: list[float]) -> str:
    if not values:
        return "-"
    return f"min {min(values):.2f} s, median {statistics.median(values):.2f} s, max {max(values):.2f} s"


def report(
    url: str, outage: Outage, deliveries: list[tuple[float, str, int, bytes]], counted_at_endpoint: bool
) -> int:
    """Print the figures; 1 when a row died or stayed pending, a result was lost or doubled, a
    conversation's order broke or the producer got a wrong answer, else 0."""
    outbox, attempts = _rows(url)
    problems: list[str] = []
    down, up = outage.down_at, outage.up_at

    # -- results produced and what became of them ------------------------------------------------
    by_call = {row.tool_call_id: row for row in outbox.values()}
    produced = outage.production
    during = [p for p in produced if down <= p[2] < up]
    missing_rows = [call for call, _, _ in produced if call not in by_call]
    accepted = [(at, event) for at, event, status, _ in deliveries if 200 <= status < 300]
    times_accepted = Counter(event for _, event in accepted)
    first_accepted: dict[str, float] = {}
    for at, event in accepted:
        first_accepted.setdefault(event, at)
    lost = [row.event_id for row in outbox.values() if row.event_id not in times_accepted]
    duplicates = sum(count - 1 for count in times_accepted.values() if count > 1)
    unknown = [event for event in times_accepted if event not in outbox]
    dead = [row for row in outbox.values() if row.status == "dead"]
    pending = [row for row in outbox.values() if row.status == "pending"]
    order: dict[str, list[int]] = defaultdict(list)
    for _, event in sorted((at, event) for event, at in first_accepted.items() if event in outbox):
        row = outbox[event]
        order[row.conversation_id].append(row.sequence)
    out_of_order = [c for c, seqs in order.items() if seqs != sorted(seqs)]

    print(
        f"results: {len(produced):,} cycles through the Tool API ({len(during):,} during the outage, "
        f"{len(outage.failures)} answered wrongly; the producer fell behind its schedule by at most "
        f"{outage.producer_behind * 1000:.0f} ms), {outage.seeded:,} seeded for the healthy drains",
        flush=True,
    )

    # -- the dead endpoint ------------------------------------------------------------------------
    opened = next((at for at, state in outage.circuit if at >= down and state != "closed"), None)
    closed = next((at for at, state in outage.circuit if at >= up and state == "closed"), None)
    in_outage = [a for a in attempts if down <= a[1] < up]
    burst = [a for a in in_outage if opened is None or a[1] < opened]
    while_open = [a[1] for a in in_outage if opened is not None and a[1] >= opened]
    gaps = [b - a for a, b in itertools.pairwise(while_open)]
    open_minutes = (up - opened) / 60 if opened is not None else 0.0
    per_minute = Counter(int((at - opened) // 60) for at in while_open) if opened is not None else Counter()
    full_minutes = [per_minute.get(m, 0) for m in range(int(open_minutes))]
    print("the dead endpoint:", flush=True)
    if counted_at_endpoint:
        counted = sum(1 for at, _, status, _ in deliveries if down <= at < up and status == 503)
        print(f"    requests it received while down: {counted:,} (outbox_attempts: {len(in_outage):,})")
    else:
        print(f"    connection attempts refused while down (outbox_attempts): {len(in_outage):,}")
    if opened is None:
        problems.append("the circuit never opened")
        print("    the circuit never opened")
    else:
        print(
            f"    before the circuit opened ({opened - down:.2f} s after the outage began): {len(burst):,} "
            f"requests, over {len({a[0] for a in burst}):,} rows"
        )
        print(
            f"    while open ({open_minutes:.1f} min): {len(while_open):,} requests for "
            f"{len(during):,} rows produced, {len(while_open) / max(open_minutes, 1e-9):.1f}/min "
            f"(full minutes: min {min(full_minutes, default=0)}, max {max(full_minutes, default=0)}; "
            f"one per {outage.probe_seconds:g} s is {60 / outage.probe_seconds:.0f}/min); "
            f"most in any {outage.probe_seconds:g} s: {_most_within(while_open, outage.probe_seconds)}; "
            f"gaps {_seconds(gaps)}"
        )

    # -- held rows ----------------------------------------------------------------------------------
    held = [outbox[e] for e in outage.backlog if e in outbox]
    spent = Counter(row.attempts for row in held)
    held_attempts = [a for a in attempts if a[0] in outage.backlog and a[1] < up]
    print(
        f"held rows: {len(held):,} pending at recovery; attempts per row at the end (the delivery "
        f"included): {', '.join(f'{n}: {c:,}' for n, c in sorted(spent.items()))}; max "
        f"{max(spent, default=0)}; attempt rows they got during the outage {len(held_attempts):,}",
        flush=True,
    )
    print(f"dead rows: {len(dead)}, pending at the end: {len(pending)}", flush=True)

    # -- recovery -----------------------------------------------------------------------------------
    after = sorted(at for at in first_accepted.values() if at >= up)
    backlog_arrivals = sorted(first_accepted[e] for e in outage.backlog if e in first_accepted)
    expected = len(outage.backlog) / outage.relay_rate if outage.relay_rate else float("nan")
    if after and backlog_arrivals:
        first, last = after[0] - up, backlog_arrivals[-1] - up
        drain = backlog_arrivals[-1] - backlog_arrivals[0]
        rate = len(backlog_arrivals) / drain if drain > 0 else float("nan")
        verdict = "within" if last <= 10 + expected else "OVER"
        print(
            f"recovery: first accepted delivery {first:.2f} s after the endpoint came back"
            + (f" (circuit closed as polled at {closed - up:.2f} s)" if closed is not None else ""),
            flush=True,
        )
        print(
            f"    the whole backlog ({len(outage.backlog):,} rows) delivered {last:.2f} s after recovery; "
            f"its drain {drain:.2f} s = {rate:,.0f} rows/s; backlog / healthy relay rate "
            f"({outage.relay_rate:,.0f}/s) = {expected:.2f} s; target 10 s + {expected:.2f} s: {verdict}",
            flush=True,
        )
        print(
            f"    the same healthy drain once the backlog was delivered: {outage.relay_rate_after:,.0f} "
            f"deliveries/s (the recovery's drain: {rate / outage.relay_rate_after:.2f} x that)",
            flush=True,
        )
        spread = [at - up for at in backlog_arrivals]
        print(
            f"    backlog arrivals after recovery: p50 {percentile(spread, 50):.2f} s, "
            f"p99 {percentile(spread, 99):.2f} s",
            flush=True,
        )
    else:
        problems.append("nothing was delivered after recovery")
    print(
        f"exactly once: {len(times_accepted):,} event ids accepted for {len(outbox):,} rows, "
        f"{duplicates} duplicates, {len(lost)} never accepted, {len(unknown)} unknown; order kept in "
        f"{len(order) - len(out_of_order):,} of {len(order):,} conversations",
        flush=True,
    )

    if outage.failures:
        problems.append(f"{len(outage.failures)} tool calls answered wrongly, first: {outage.failures[0]}")
    if missing_rows:
        problems.append(f"{len(missing_rows)} finished cycles have no outbox row, first {missing_rows[0]}")
    if dead:
        problems.append(f"{len(dead)} rows dead")
    if pending:
        problems.append(f"{len(pending)} rows still pending")
    if lost:
        problems.append(f"{len(lost)} results never accepted")
    if duplicates:
        problems.append(f"{duplicates} results accepted more than once")
    if unknown:
        problems.append(f"{len(unknown)} accepted event ids not in the outbox")
    if out_of_order:
        problems.append(f"order broken in {len(out_of_order)} conversations, first {out_of_order[0]}")
    for problem in problems:
        print(f"FAIL: {problem}", flush=True)
    return 1 if problems else 0

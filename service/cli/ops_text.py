"""How the operator CLI prints: cells, times, fixed-width tables, outbox rows and traces as text."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

Json = dict[str, Any]

# What a terminal acts on instead of printing: C0 controls (ESC starts every escape sequence), DEL,
# C1 controls (U+009B is a one-character CSI to some terminals), the bidirectional overrides and
# isolates that reorder what is shown, and the line and paragraph separators. Outside text — an
# endpoint's reply in ``last_error``, a pause reason, a tool's answer — reaches the operator's
# terminal only through ``visible``; the database and the JSON APIs keep it as it came.
_OUTSIDE_C0 = r"\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069"
_HIDDEN = re.compile(rf"[\x00-\x1f{_OUTSIDE_C0}]")
# JSON text escapes C0 itself (its only raw line breaks are its indentation).
_HIDDEN_IN_JSON = re.compile(rf"[{_OUTSIDE_C0}]")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str) -> str:
    """``text`` with every character a terminal would act on shown as an escape (``\\x1b``,
    ``\\u202e``): printed, it can move no cursor, retitle no window and hide no line."""
    return _HIDDEN.sub(_escaped, text)


def screen(text: str) -> str:
    """Text the CLI prints: its own line breaks kept, every other control character escaped."""
    return "\n".join(visible(line) for line in text.split("\n"))


def json_text(data: Any) -> str:
    """``--json`` output: JSON escapes C0 controls itself; the rest are escaped here too (the same
    \\u escape, so the text is still the same JSON)."""
    text = json.dumps(data, indent=2, ensure_ascii=False)
    return _HIDDEN_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def cell(value: Any) -> str:
    return "-" if value is None else visible(str(value))


def when(value: str | None) -> str:
    """An RFC 3339 time to the second, for tables (the JSON keeps microseconds)."""
    return "-" if value is None else value[:19] + "Z"


def short_when(value: str | None) -> str:
    """``MM-DD HH:MM:SS`` (UTC) of an RFC 3339 time, for lists that fit a terminal."""
    return "-" if value is None else f"{value[5:10]} {value[11:19]}"


def flat(value: str | None) -> str:
    """A value on one line, control characters escaped."""
    return "-" if value is None else visible(" ".join(value.split()))


def clip(value: str | None, width: int = 60) -> str:
    text = flat(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def pairs(counts: dict[str, int]) -> str:
    return "  ".join(f"{key} {value}" for key, value in counts.items())


def compact(value: Any) -> str:
    return visible(json.dumps(value, separators=(",", ":"), ensure_ascii=False))


def table(
    headers: list[str],
    rows: list[list[str]],
    *,
    width: int | None = None,
    flexible: Sequence[tuple[int, int]] = (),
) -> str:
    """Columns two spaces apart. With ``width``, the ``flexible`` columns (index, narrowest width)
    give up characters, the first listed first, until a line fits; their cells end in "…"."""
    if not rows:
        return "(no rows)"
    widths = [max(len(headers[i]), *(len(row[i]) for row in rows)) for i in range(len(headers))]
    if width is not None:
        for index, narrowest in flexible:
            excess = sum(widths) + 2 * (len(widths) - 1) - width
            if excess <= 0:
                break
            widths[index] -= min(excess, max(0, widths[index] - narrowest))
    lines = [headers, *rows]
    return "\n".join(
        "  ".join(fit(c, w).ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in lines
    )


def fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def fields(items: list[tuple[str, Any]], indent: str = "  ") -> str:
    width = max(len(name) for name, _ in items)
    return "\n".join(f"{indent}{name.ljust(width)}  {cell(value)}" for name, value in items)


def attempts_table(attempts: list[Json]) -> str:
    rows = [
        [
            str(a["attempt"]),
            when(a["started_at"]),
            f"{a['duration_ms']} ms",
            cell(a["status_code"]),
            cell(a["error_class"]),
            a["outcome"],
            a["relay_id"],
            clip(a["response_excerpt"], 40),
        ]
        for a in attempts
    ]
    return table(["#", "STARTED", "DURATION", "HTTP", "ERROR", "OUTCOME", "RELAY", "RESPONSE"], rows)


def outbox_block(row: Json) -> str:
    lease = None if row["lease_owner"] is None else f"{row['lease_owner']} until {row['lease_expires_at']}"
    head = fields(
        [
            ("event_id", row["event_id"]),
            ("status", row["status"]),
            ("tool", row["tool"]),
            ("tool_call_id", row["tool_call_id"]),
            ("operation_id", row["operation_id"]),
            ("conversation", f"{row['conversation_id']} (sequence {row['sequence']})"),
            ("attempts", row["attempts"]),
            ("created_at", row["created_at"]),
            ("next_attempt_at", row["next_attempt_at"] if row["status"] == "pending" else None),
            ("delivered_at", row["delivered_at"]),
            ("last_error", row["last_error"]),
            ("lease", lease),
            ("payload", compact(row["payload"])),
        ]
    )
    return f"{head}\n\n  delivery attempts ({len(row['delivery_attempts'])}):\n" + indent(
        attempts_table(row["delivery_attempts"])
    )


def indent(text: str, prefix: str = "  ") -> str:
    return "\n".join(prefix + line for line in text.splitlines())


def trace_text(trace: Json) -> str:
    call, operations, outbox = trace["tool_call"], trace["operations"], trace["outbox"]
    sections = [f"tool call {trace['tool_call_id']}", indent(summary(trace))]
    if call is None:
        sections.append("\nrecorded answer: none")
    else:
        sections.append(f"\nrecorded answer: {call['status_code']} at {call['created_at']}")
        sections.append(
            fields(
                [
                    ("tool", call["tool"]),
                    ("conversation", call["conversation_id"]),
                    ("response", compact(call["response"])),
                    *trace_fields(call),
                ]
            )
        )
    for op in operations:
        named = (
            ""
            if op["tool_call_id"] == trace["tool_call_id"]
            else f" (named in the answer; started by {op['tool_call_id']})"
        )
        sections.append(f"\noperation {op['operation_id']}{named}")
        sections.append(
            fields(
                [
                    ("tool", op["tool"]),
                    ("state", op["state"]),
                    ("reason", op["reason"]),
                    ("activity", op["activity"]),
                    ("started_at", op["started_at"]),
                    ("ends_at", op["ends_at"]),
                    ("finalized_at", op["finalized_at"]),
                    ("lateness_ms", op["lateness_ms"]),
                ]
            )
        )
    if not outbox:
        sections.append("\noutbox: no row (nothing to deliver yet, or a tool that delivers nothing)")
    for row in outbox:
        sections.append(f"\noutbox event {row['event_id']}")
        sections.append(outbox_block(row))
    return "\n".join(sections)


def trace_fields(call: Json) -> list[tuple[str, Any]]:
    """The OpenTelemetry trace of the call (its id, and its address when TRACE_URL_TEMPLATE names
    one); "not traced" when it was not."""
    trace_id = call.get("trace_id")
    if not trace_id:
        return [("trace", "not traced")]
    return [("trace", trace_id), *([("trace url", call["trace_url"])] if call.get("trace_url") else [])]


def summary(trace: Json) -> str:
    """One line per fact, in the order they happened: answer, operation ending, delivery."""
    call = trace["tool_call"]
    lines = []
    if call is None:
        lines.append("answer: not recorded")
    else:
        status = call["response"].get("status") if isinstance(call["response"], dict) else None
        error = call["response"].get("error") if isinstance(call["response"], dict) else None
        lines.append(f"answer: {call['status_code']} {status or error or ''}".rstrip())
    for op in trace["operations"]:
        ending = "still focusing" if op["state"] == "focusing" else f"{op['state']} ({op['reason']})"
        at = f" at {op['finalized_at']}" if op["finalized_at"] else f", ends at {op['ends_at']}"
        lines.append(f"operation {op['operation_id']}: {ending}{at}")
    for row in trace["outbox"]:
        tries = f"{len(row['delivery_attempts'])} attempt(s)"
        if row["status"] == "delivered":
            lines.append(f"result {row['event_id']}: delivered at {row['delivered_at']} after {tries}")
        elif row["status"] == "dead":
            lines.append(
                f"result {row['event_id']}: DEAD after {tries}; last error: {cell(row['last_error'])}"
            )
        else:
            lines.append(
                f"result {row['event_id']}: pending, {tries}, next attempt at {row['next_attempt_at']}"
            )
    return "\n".join(lines)


def delivery_text(state: Json, retention: Json) -> str:
    """``ops delivery status``: paused or not, the circuit, and what retention keeps."""
    if state["paused"]:
        reason = f" ({flat(state['reason'])})" if state["reason"] else ""
        paused = f"paused since {when(state['paused_at'])} by {state['paused_by']}{reason}"
    else:
        paused = "running"
    circuit = f"{state['circuit']} since {when(state['circuit_since'])}"
    if state["circuit"] != "closed":
        circuit += f", next probe {when(state['next_probe_at'])}; last error: {clip(state['last_error'])}"
    if retention["delivered_days"] is None:
        kept = "not reported yet (no relay has pruned)"
    else:
        dead = "kept" if retention["dead_days"] == 0 else f"{retention['dead_days']} days"
        kept = (
            f"delivered rows {retention['delivered_days']} days, dead rows {dead} "
            f"(reported by {retention['reported_by']} at {when(retention['reported_at'])}; "
            f"last pruned {retention['last_pruned_rows']} row(s))"
        )
    lines = [
        f"delivery      {paused}",
        f"circuit       {circuit}",
        f"last probe    {when(state['last_probe_at'])}",
        f"retention     {kept}",
        f"oldest rows   delivered {when(retention['oldest_delivered_at'])}, "
        f"dead {when(retention['oldest_dead_at'])}",
    ]
    return "\n".join(lines)


#: Lists fit a terminal this wide unless ``--wide`` is given.
LIST_WIDTH = 100
SHORT_ID = 8


def short_ids(ids: Sequence[str], least: int = SHORT_ID) -> dict[str, str]:
    """Each of ``ids`` cut to one length, the shortest (of at least ``least`` characters) at which no
    two of them read the same. The ids are time-ordered UUIDs: rows of the same minute share their
    first eight hex digits, so a list of them needs more. A cut never ends on a hyphen. ``show``
    and ``requeue`` take any unique beginning, so what a list shows can be typed back."""
    distinct = set(ids)
    longest = max((len(i) for i in distinct), default=0)
    length = least
    while length < longest and len({i[:length] for i in distinct}) < len(distinct):
        length += 1
    cut = {i: i[:length] for i in distinct}
    return {i: (short[:-1] if short.endswith("-") else short) for i, short in cut.items()}


def _next_or_delivered(row: Json) -> str | None:
    return {"delivered": row["delivered_at"], "pending": row["next_attempt_at"]}.get(row["status"])


def outbox_table(data: Json, wide: bool) -> str:
    """``ops outbox list``: every column in full (``wide``), or fit to ``LIST_WIDTH``."""
    if wide:
        rows = [
            [
                row["event_id"],
                row["status"],
                str(row["attempts"]),
                row["conversation_id"],
                str(row["sequence"]),
                row["tool"],
                row["tool_call_id"],
                when(row["created_at"]),
                when(_next_or_delivered(row)),
                flat(row["last_error"]),
            ]
            for row in data["outbox"]
        ]
        headers = ["EVENT_ID", "STATUS", "ATT", "CONVERSATION", "SEQ", "TOOL", "TOOL_CALL_ID", "CREATED"]
        return table([*headers, "DELIVERED/NEXT", "LAST_ERROR"], rows)
    shown = short_ids([row["event_id"] for row in data["outbox"]])
    rows = [
        [
            shown[row["event_id"]],
            row["status"],
            str(row["attempts"]),
            row["conversation_id"],
            str(row["sequence"]),
            row["tool_call_id"],
            short_when(row["created_at"]),
            flat(row["last_error"]),
        ]
        for row in data["outbox"]
    ]
    headers = [
        "EVENT_ID",
        "STATUS",
        "ATT",
        "CONVERSATION",
        "SEQ",
        "TOOL_CALL_ID",
        "CREATED UTC",
        "LAST_ERROR",
    ]
    return table(headers, rows, width=LIST_WIDTH, flexible=[(5, 16), (3, 12), (7, 10)])


def operations_table(data: Json, wide: bool) -> str:
    """``ops operations list``: every column in full (``wide``), or fit to ``LIST_WIDTH``."""
    if wide:
        rows = [
            [
                row["operation_id"],
                row["state"],
                cell(row["reason"]),
                row["conversation_id"],
                row["tool_call_id"],
                when(row["started_at"]),
                when(row["ends_at"]),
                when(row["finalized_at"]),
                cell(row["lateness_ms"]),
            ]
            for row in data["operations"]
        ]
        headers = ["OPERATION_ID", "STATE", "REASON", "CONVERSATION", "TOOL_CALL_ID", "STARTED", "ENDS"]
        return table([*headers, "FINALIZED", "LATE_MS"], rows)
    shown = short_ids([row["operation_id"] for row in data["operations"]])
    rows = [
        [
            shown[row["operation_id"]],
            row["state"],
            cell(row["reason"]),
            row["conversation_id"],
            row["tool_call_id"],
            short_when(row["started_at"]),
            cell(row["lateness_ms"]),
        ]
        for row in data["operations"]
    ]
    headers = ["OPERATION", "STATE", "REASON", "CONVERSATION", "TOOL_CALL_ID", "STARTED UTC", "LATE_MS"]
    return table(headers, rows, width=LIST_WIDTH, flexible=[(4, 16), (3, 12)])


def stats_text(data: Json, delivery: Json) -> str:
    """``ops stats``: the numbers, and whether delivery runs."""
    box, ops, late = data["outbox"], data["operations"], data["deadline_lateness_ms"]
    attempts = data["attempts_last_hour"]
    age = box["oldest_pending_age_seconds"]
    lines = [
        f"server time         {data['server_time']}",
        "outbox              " + pairs(box["by_status"]) + f"  (due now {box['due_now']})",
        f"delivery            {'paused' if delivery['paused'] else 'running'}, circuit {delivery['circuit']}",
        f"oldest pending      {'-' if age is None else f'{age:.1f} s'}",
        "operations          " + pairs(ops["by_state"]),
        f"deadline lateness   p50 {cell(late['p50'])} ms  p99 {cell(late['p99'])} ms  "
        f"max {cell(late['max'])} ms  (over {late['completed']} completed)",
        "attempts, last hour " + pairs(attempts["by_outcome"]) + f"  (total {attempts['total']})",
        history_line(data["history"]),
    ]
    return "\n".join(lines)


def history_line(history: Json) -> str:
    """History retention's setting, its last round and the oldest operation kept."""
    if history["retention_days"] is None:
        kept = "not pruned yet (HISTORY_RETENTION_DAYS)"
    else:
        kept = (
            f"{history['retention_days']} days, last pruned {cell(history['last_pruned_at'])} "
            f"({sum(history['last_pruned'].values())} rows; {history['total_pruned']} in all)"
        )
    return f"history kept        {kept}, oldest operation {cell(history['oldest_operation_at'])}"


def requeued_text(rows: list[Json]) -> str:
    """``ops outbox requeue``: each row requeued, and how many."""
    if not rows:
        return "no dead rows: nothing requeued"
    lines = [
        f"requeued {row['event_id']} (tool call {row['tool_call_id']}, conversation "
        f"{row['conversation_id']}, sequence {row['sequence']}): pending, attempts 0, due now"
        for row in rows
    ]
    return "\n".join([*lines, f"{len(rows)} row(s) requeued"])

"""Structured JSON logs (structlog): one object per line on stderr, for our own events and for
records of other libraries (psycopg, uvicorn) alike. ``LOG_FORMAT=console`` renders the same
events for a person at a terminal instead (structlog's ``ConsoleRenderer``); ``make dev`` sets it
for its processes when its output is a terminal and it does not run in a container.

Our own events skip the stdlib ``logging`` machinery (caller lookup, formatter, handler): they are
rendered by structlog and written as bytes, about a third of the CPU per line (measured in
``bench/call_cost.py``). Records of other libraries go through one stdlib handler that renders
them the same way.

Inside a recording span (``service.telemetry``), every line — ours and other libraries' — carries
the span's ``trace_id`` and ``span_id`` (hex, as OpenTelemetry's log correlation writes them), so a
line leads to its trace and back; outside one, or when the process does not trace, nothing is added.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import threading
from datetime import UTC, datetime
from typing import Any

import msgspec
import structlog
from structlog.typing import EventDict, Processor

from service.telemetry import TRACING, log_ids


def add_trace_ids(logger: Any, method_name: str, event_dict: EventDict) -> EventDict:
    """``trace_id`` and ``span_id`` of the recording span the line is written in (none outside
    one; when the process does not trace, one attribute test)."""
    if TRACING.on and (ids := log_ids()) is not None:
        for key, value in ids.items():
            event_dict.setdefault(key, value)
    return event_dict


_STAMP = structlog.processors.TimeStamper(fmt="iso", utc=True)
_SHARED: list[Processor] = [
    structlog.contextvars.merge_contextvars,
    add_trace_ids,
    structlog.stdlib.add_log_level,
    structlog.stdlib.add_logger_name,
    _STAMP,
]


# What msgspec leaves raw that a terminal tailing the log would act on: DEL, the C1 controls and
# the bidirectional overrides (JSON escapes C0 itself). Only inside strings, so \\u is still JSON.
_RAW_CONTROLS = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")


def _json(event: Any, **_: Any) -> bytes:
    # msgspec renders str, numbers, UUIDs and datetimes natively; anything else as its str().
    line = msgspec.json.encode(event, enc_hook=str)
    # find(), not ``in``: bytes.__contains__ first tries its operand as an integer (a TypeError made
    # and dropped on every line).
    if line.isascii() and line.find(b"\x7f") < 0:
        return line
    return _RAW_CONTROLS.sub(lambda m: f"\\u{ord(m.group()):04x}", line.decode()).encode()


def _own_line(logger: Any, method_name: str, event_dict: Any) -> bytes:
    """Our own events' chain as one processor: ``_SHARED``, ``format_exc_info`` and the JSON
    rendering, called in that order (the same line; one processor call instead of six)."""
    event_dict = structlog.contextvars.merge_contextvars(logger, method_name, event_dict)
    event_dict = add_trace_ids(logger, method_name, event_dict)
    event_dict = structlog.stdlib.add_log_level(logger, method_name, event_dict)
    event_dict = structlog.stdlib.add_logger_name(logger, method_name, event_dict)
    event_dict = _STAMP(logger, method_name, event_dict)
    if "exc_info" in event_dict:
        event_dict = structlog.processors.format_exc_info(logger, method_name, event_dict)
    return _json(event_dict)


class _StderrLogger:
    """Writes each rendered line to the process's stderr as it is at that moment (tests swap it),
    whole lines under one lock; a closed or missing stream drops the line rather than fail the
    request that logged it. Keeps its name for ``add_logger_name``."""

    _lock = threading.Lock()

    def __init__(self, name: str | None) -> None:
        self.name = name or "root"

    def msg(self, message: bytes | str) -> None:
        if isinstance(message, str):
            message = message.encode("utf-8", "replace")
        stream = sys.stderr
        with self._lock:
            try:
                buffer = getattr(stream, "buffer", None)
                if buffer is not None:
                    buffer.write(message + b"\n")
                    buffer.flush()
                else:
                    stream.write(message.decode() + "\n")
                    stream.flush()
            except (ValueError, OSError):
                pass

    debug = info = warning = warn = error = err = critical = exception = fatal = failure = msg


# The level configure_logging set (None until it runs, or when it renders for a person at a
# terminal: structlog's own configuration then applies).
_LEVEL: int | None = None


def console_format(environ: Any = os.environ) -> bool:
    """Whether ``LOG_FORMAT`` asks for lines a person reads at a terminal (``console``) rather than
    JSON (``json``, the default)."""
    value = str(environ.get("LOG_FORMAT", "json")).strip().lower()
    if value not in ("json", "console"):
        raise ValueError(f"LOG_FORMAT must be json or console, not {value!r}")
    return value == "console"


def in_container() -> bool:
    """Whether this process runs in a container (Docker, Podman, a Kubernetes pod): its logs go to a
    collector, which reads JSON."""
    return (
        os.path.exists("/.dockerenv")
        or os.path.exists("/run/.containerenv")
        or "KUBERNETES_SERVICE_HOST" in os.environ
    )


class Lines:
    """Our own events on the per-call path (a tool call's line, a settled operation's), rendered
    as ``_own_line`` renders them and written by ``_StderrLogger``: the same line, without
    structlog's bound-logger dispatch (its method proxy, the copy of the event dict, the processor
    loop, the rendering's result checks), about half the CPU of a line. Where ``configure_logging``
    has not run, the line goes through structlog as any other."""

    __slots__ = ("_fallback", "_name", "_writer")

    def __init__(self, name: str) -> None:
        self._name = name
        self._writer = _StderrLogger(name)
        self._fallback = structlog.get_logger(name)

    def info(self, event: str, **fields: Any) -> None:
        level = _LEVEL
        if level is None:
            self._fallback.info(event, **fields)
            return
        if level > logging.INFO:
            return
        # _own_line's chain for "info", in its order: the event, the context, level, logger, time.
        fields["event"] = event
        structlog.contextvars.merge_contextvars(None, "info", fields)
        if TRACING.on:
            add_trace_ids(None, "info", fields)
        fields["level"] = "info"
        fields["logger"] = self._name
        fields["timestamp"] = datetime.now(tz=UTC).isoformat().replace("+00:00", "Z")
        self._writer.msg(_json(fields))


def _logger_factory(*args: Any) -> _StderrLogger:
    return _StderrLogger(args[0] if args else None)


def configure_logging(level: int = logging.INFO) -> None:
    """Render every record as one JSON line on stderr (or, with ``LOG_FORMAT=console``, as a line
    for a person to read)."""
    global _LEVEL
    if console_format():
        _configure_console(level)
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=_SHARED,
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.format_exc_info,
                structlog.processors.JSONRenderer(),
            ],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    structlog.configure(
        processors=[_own_line],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=_logger_factory,
        cache_logger_on_first_use=True,
    )
    _LEVEL = level


def _configure_console(level: int) -> None:
    """Every record as structlog's console line: time, level, event, then the fields."""
    global _LEVEL
    renderer = structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    stamp = structlog.processors.TimeStamper(fmt="%H:%M:%S", utc=False)
    chain: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        add_trace_ids,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        stamp,
    ]
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=chain,
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    structlog.configure(
        processors=[*chain, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=_logger_factory,
        cache_logger_on_first_use=True,
    )
    _LEVEL = None  # Lines go through structlog, and so through the renderer

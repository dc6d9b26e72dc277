"""What the observability files query: the metric names in PromQL expressions, and where they are.

Good enough for the expressions of deploy/observability (no strings holding metric names): label
matchers, ranges, grouping clauses and function calls are removed; what is left that looks like an
identifier and is not a keyword is a metric name.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
OBSERVABILITY = ROOT / "deploy" / "observability"
RULES = OBSERVABILITY / "alerts.yml"
RULE_TESTS = OBSERVABILITY / "alerts.test.yml"
DASHBOARD = OBSERVABILITY / "grafana" / "dashboards" / "lineup.json"
DATASOURCES = OBSERVABILITY / "grafana" / "provisioning" / "datasources" / "prometheus.yml"
PROMETHEUS = OBSERVABILITY / "prometheus.yml"

KEYWORDS = {
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "bool",
    "and",
    "or",
    "unless",
    "offset",
}
# Series Prometheus makes itself for every target, not exported by anyone.
PROMETHEUS_SERIES = {"up"}

_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"' + r"|'(?:[^'\\]|\\.)*'")
_MATCHERS = re.compile(r"\{[^}]*\}")
_RANGES = re.compile(r"\[[^\]]*\]")
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_IDENTIFIER = re.compile(r"(?<![\w.])([a-zA-Z_:][a-zA-Z0-9_:]*)(?![\w.])(\s*\()?")


def metric_names(expr: str) -> set[str]:
    text = _STRINGS.sub(" ", expr)
    text = _MATCHERS.sub(" ", text)
    text = _RANGES.sub(" ", text)
    text = _GROUPING.sub(" ", text)
    names = set()
    for match in _IDENTIFIER.finditer(text):
        name, call = match.group(1), match.group(2)
        if call or name in KEYWORDS or name.lower() in {"inf", "nan"}:
            continue
        names.add(name)
    return names


def rules() -> list[dict[str, Any]]:
    loaded: dict[str, Any] = yaml.safe_load(RULES.read_text())
    return [rule for group in loaded["groups"] for rule in group["rules"]]


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def dashboard_exprs() -> Iterator[str]:
    for panel in dashboard()["panels"]:
        for target in panel.get("targets", []):
            yield target["expr"]


def queried_metrics() -> dict[str, set[str]]:
    """Every metric name the rules and the dashboard query -> where (alert or panel title)."""
    found: dict[str, set[str]] = {}
    for rule in rules():
        for name in metric_names(rule["expr"]):
            found.setdefault(name, set()).add(f"alert {rule['alert']}")
    for panel in dashboard()["panels"]:
        for target in panel.get("targets", []):
            for name in metric_names(target["expr"]):
                found.setdefault(name, set()).add(f"panel {panel['title']}")
    return found

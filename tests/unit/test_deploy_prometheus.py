"""The alert rules in ``deploy/prometheus/`` load, pass their own unit tests, and name only
metrics the code exports.

promtool (Debian's ``prometheus`` package) checks and tests the rules; without it those two
tests are skipped. The metric names are checked without it: every metric a rule's expression
reads must be one the receiver's ``/metrics`` can show, as read from the code's own metric
objects, so a metric renamed or removed in the code fails here until the rules follow. The
same names are checked against the metrics table in ``docs/operations.md``, both ways.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.metrics import MetricWrapperBase

from flowledger.plumbing import metrics
from flowledger.reports.observability import register
from tests.support.ledgers import new_ledger

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "flowledger.rules.yml"
RULE_TESTS = ROOT / "deploy" / "prometheus" / "flowledger.rules.test.yml"
PROMTOOL = shutil.which("promtool")

# Series Prometheus writes itself for every target: not the code's to export.
PROMETHEUS_OWN = frozenset({"up"})

# The sample names each kind of metric family is exported under.
SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_count", "_sum", "_created"),
    "summary": ("", "_count", "_sum", "_created"),
    "gauge": ("",),
}

PROMQL_WORDS = frozenset(
    {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right"}
    | {"bool", "offset", "inf", "nan"}
)
STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
MATCHERS = re.compile(r"\{[^{}]*\}")
RANGE = re.compile(r"\[[^\[\]]*\]")
LABEL_LIST = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
IDENTIFIER = re.compile(r"(?<![\w.])([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?")


def expressions(rules_text: str) -> list[str]:
    """Every rule's ``expr``, one line or a block scalar (``>-``, ``|``) of deeper lines."""
    found: list[str] = []
    lines = rules_text.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"^(\s*)(?:-\s+)?expr:\s*(.*)$", line)
        if m is None:
            continue
        indent, value = len(m.group(1)), m.group(2).strip()
        if value and value[0] not in ">|":
            found.append(value.strip("'\"") if value[0] in "'\"" else value)
            continue
        block = []
        for more in lines[i + 1 :]:
            if more.strip() and len(more) - len(more.lstrip()) <= indent:
                break
            block.append(more.strip())
        found.append(" ".join(part for part in block if part))
    return found


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads: identifiers that are not in a string, a
    label matcher, a range, a ``by (...)`` list, a function call or a PromQL keyword."""
    text = STRING.sub('""', expr)
    text = MATCHERS.sub("{}", text)
    text = RANGE.sub("[]", text)
    text = LABEL_LIST.sub(" ", text)
    return {
        m.group(1)
        for m in IDENTIFIER.finditer(text)
        if m.group(2) is None and m.group(1).lower() not in PROMQL_WORDS
    }


def exported_families(tmp_path: Path) -> dict[str, str]:
    """Every metric family ``/metrics`` can show, by name, with its type: the receiver's
    metrics (the module's own objects, unlabelled children or none) and the ledger's gauges
    and job counters registered over a fresh ledger, as ``flowledger run`` registers them."""
    store = new_ledger(tmp_path / "ledger.db")
    try:
        registry = CollectorRegistry()
        register(registry, store)
        families = list(registry.collect())
    finally:
        store.dispose()
    for value in vars(metrics).values():
        if isinstance(value, MetricWrapperBase):
            families.extend(value.collect())
    return {family.name: family.type for family in families}


def exported_names(tmp_path: Path) -> set[str]:
    """Every sample name ``/metrics`` can show (:func:`exported_families`)."""
    return {
        name + suffix
        for name, kind in exported_families(tmp_path).items()
        for suffix in SUFFIXES[kind]
    } | PROMETHEUS_OWN


def unknown_metrics(rules_text: str, exported: set[str]) -> set[str]:
    return {name for expr in expressions(rules_text) for name in metric_names(expr)} - exported


def test_every_metric_a_rule_reads_is_exported(tmp_path: Path) -> None:
    rules_text = RULES.read_text()
    exprs = expressions(rules_text)
    assert len(exprs) == rules_text.count("- alert:") == 6
    exported = exported_names(tmp_path)
    read = {name for expr in exprs for name in metric_names(expr)}
    assert read >= {
        "flowledger_holds_open",
        "flowledger_source_sync_lag_seconds",
        "flowledger_alerts_pending",
        "flowledger_source_failing",
        "flowledger_http_request_duration_seconds_count",
        "up",
    }
    assert unknown_metrics(rules_text, exported) == set()


def test_a_rule_naming_a_metric_the_code_does_not_export_fails(tmp_path: Path) -> None:
    exported = exported_names(tmp_path)
    rules_text = """
groups:
  - name: made-up
    rules:
      - alert: Renamed
        expr: max by (source) (flowledger_source_sync_lag_secs{source="a"}) > 900
      - alert: Suffix
        expr: >-
          sum by (route) (rate(flowledger_http_request_duration_seconds_total[5m]))
          / on (route) group_left sum by (route) (rate(flowledger_holds_open_count[5m]))
      - alert: Fine
        expr: flowledger_job_failures_total{job=~"sync:.+"} > 0 or up == 0
"""
    assert unknown_metrics(rules_text, exported) == {
        "flowledger_source_sync_lag_secs",
        "flowledger_http_request_duration_seconds_total",
        "flowledger_holds_open_count",
    }


def test_metric_names_skip_labels_functions_strings_and_keywords() -> None:
    expr = (
        'sum by (route, status) (rate(a_total{status=~"5..", x="b_c"}[5m] offset 1h))'
        " / ignoring (status) group_left (le) histogram_quantile(0.9, c_bucket) > bool 1e3"
        " unless on (job) absent(d)"
    )
    assert metric_names(expr) == {"a_total", "c_bucket", "d"}


@pytest.mark.skipif(PROMTOOL is None, reason="promtool is not installed (Debian: prometheus)")
@pytest.mark.parametrize(
    ("command", "path"), [("check", RULES), ("test", RULE_TESTS)], ids=["check", "test"]
)
def test_promtool_passes_the_rules(command: str, path: Path) -> None:
    assert PROMTOOL is not None
    done = subprocess.run(
        [PROMTOOL, command, "rules", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


OPERATIONS = ROOT / "docs" / "operations.md"
TABLE_NAME = re.compile(r"`(flowledger_[a-z0-9_]+)(?:\{[^`]*\})?`")


def metrics_table(page: str) -> set[str]:
    """The metric names in the first column of the table under ``## Metrics``."""
    section = page.split("\n## Metrics\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    return {name for row in rows for name in TABLE_NAME.findall(row.split(" | ")[0])}


def test_every_exported_metric_is_in_the_operations_metrics_table(tmp_path: Path) -> None:
    """A counter is named as it is scraped (``…_total``), other families by their name."""
    shown = {
        name + ("_total" if kind == "counter" else "")
        for name, kind in exported_families(tmp_path).items()
    }
    table = metrics_table(OPERATIONS.read_text())
    assert shown - table == set(), "add them to docs/operations.md's metrics table"
    assert table - shown == set(), "docs/operations.md's metrics table names no such metric"

"""Checking PromQL against the exporter: which metrics and label values an expression reads, and
whether the real output (or SGLang's own modelled /metrics) has them; shared by the rule, dashboard
and metric-table tests."""

from __future__ import annotations

import functools
import re
import subprocess
import sys

import native_metrics
from conftest import ROOT, corpus_files
from exporter_support import fpm_exposition, gpu_exposition
from prometheus_client.parser import text_string_to_metric_families

RULES_DIR = ROOT / "deploy" / "prometheus"
RULE_FILES = sorted(RULES_DIR.glob("sglang-*.yml"))

#: Labels Prometheus or the scrape configuration adds; the exporter never emits them.
TARGET_LABELS = {"job", "instance", "namespace", "pod", "container", "sglang_group", "quantile"}
_METRIC = re.compile(r"(?<![\w:])((?:sglang_(?:scheduler|exporter|gpu)_)\w+|sglang:\w+)(?![\w:])(\s*\{([^}]*)\})?")
MATCHER = re.compile(r'(\w+)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"')


@functools.cache
def exporter_samples() -> dict[str, list[dict[str, str]]]:
    """``{sample_name: [labels, ...]}`` of the real command's output: scheduler/exporter metrics from
    ``--one-shot`` over every corpus log and a two-stage SGLang Omni log (tests/omni/), GPU metrics from the GPU collector on the fake NVML, the
    per-forward-pass metrics from the FPM collector on decoded SGLang messages."""
    paths = ",".join(str(p) for p in [*corpus_files(), ROOT / "tests" / "omni" / "two-stage-shim.log"])
    out = subprocess.run(
        [sys.executable, "-m", "exporter", "--log.path", paths, "--one-shot"],
        capture_output=True, text=True, timeout=120, check=True, cwd=ROOT,
    ).stdout
    found: dict[str, list[dict[str, str]]] = {}
    for text in (out, gpu_exposition(), fpm_exposition()):
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                found.setdefault(s.name, []).append(dict(s.labels))
    return found


NATIVE = re.compile(r'\{__name__=~"sglang\[:_\](\w+)"(?:,\s*([^}]*))?\}')


def references(expr: str) -> list[tuple[str, list[tuple[str, str, str]]]]:
    """Metric names an expression reads (recording-rule names with ':' excluded), with matchers; SGLang's
    own names read in both spellings (``{__name__=~"sglang[:_]x"}``) as ``sglang:x``."""
    refs = []
    for m in NATIVE.finditer(expr):
        refs.append((f"sglang:{m.group(1)}", MATCHER.findall(m.group(2) or "")))
    for m in _METRIC.finditer(NATIVE.sub("", expr)):
        matchers = MATCHER.findall(m.group(3) or "")
        refs.append((m.group(1), matchers))
    return refs


def known_samples() -> dict[str, list[dict[str, str]]]:
    """What the rules and panels may read: the exporter's real output and SGLang's own series of the
    modelled releases."""
    return {**exporter_samples(), **native_metrics.samples()}


def check_references(where: str, expr: str) -> list[str]:
    """Problems with the metric names and fixed label values an expression uses (empty when fine)."""
    known = known_samples()
    problems = []
    for name, matchers in references(expr):
        if name not in known:
            whose = "SGLang's modelled /metrics" if name.startswith("sglang:") else "the exporter's output"
            problems.append(f"{where}: {name} is not in {whose}")
            continue
        for label, op, val in matchers:
            if label in TARGET_LABELS or op in ("!=", "!~") or "$" in val:
                continue
            values = {labels.get(label) for labels in known[name]}
            pattern = re.compile(val if op == "=~" else re.escape(val))
            if not any(v is not None and pattern.fullmatch(v) for v in values):
                problems.append(f"{where}: {name}{{{label}{op}{val!r}}} matches nothing (values: {sorted(v for v in values if v)})")
    return problems

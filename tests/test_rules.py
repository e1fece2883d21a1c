"""The Prometheus rule files: generated, promtool accepts them, every alert is tested both ways, names are real.

* the committed rule files equal what ``python3 -m monitoring`` gives from monitoring/config.py;
* ``promtool check rules`` on every rule file and ``promtool test rules`` on every test file;
* every alert has a promtool case where it fires and one where it must not (an ``exp_alerts: []``);
* every metric a rule reads exists in the real exporter's output (one-shot over the whole corpus; GPU
  names from the GPU collector run on the fake NVML backend), with the label values the rule selects;
* recording rules are named ``level:metric:operations``; alerts carry severity, summary, a templated
  description and an absolute runbook_url (the config's one base) whose section exists in docs/runbook.md.
"""

from __future__ import annotations

import functools
import re
import subprocess
import sys

import pytest
import yaml
from conftest import CORPUS, ROOT, corpus_files
from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, str(ROOT))  # monitoring/ builds files and is not installed with the package
import monitoring  # noqa: E402
from monitoring.config import DEFAULT  # noqa: E402

RULES_DIR = ROOT / "deploy" / "prometheus"
RULE_FILES = sorted(RULES_DIR.glob("sglang-*.yml"))
TEST_FILES = sorted((RULES_DIR / "tests").glob("*.test.yml"))
RUNBOOK = ROOT / "docs" / "runbook.md"

#: Labels Prometheus or the scrape configuration adds; the exporter never emits them.
TARGET_LABELS = {"job", "instance", "namespace", "pod", "container", "sglang_group", "quantile"}
_METRIC = re.compile(r"(?<![\w:])((?:sglang_(?:scheduler|exporter|gpu)_)\w+)(?![\w:])(\s*\{([^}]*)\})?")
_MATCHER = re.compile(r'(\w+)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"')


# ------------------------------------------------------------------------------- shared helpers


@functools.cache
def exporter_samples() -> dict[str, list[dict[str, str]]]:
    """``{sample_name: [labels, ...]}`` of the real command's output: scheduler/exporter metrics from
    ``--one-shot`` over every corpus log, GPU metrics from the GPU collector on the fake NVML."""
    paths = ",".join(str(p) for p in corpus_files())
    out = subprocess.run(
        [sys.executable, "-m", "exporter", "--log.path", paths, "--one-shot"],
        capture_output=True, text=True, timeout=120, check=True, cwd=ROOT,
    ).stdout
    found: dict[str, list[dict[str, str]]] = {}
    for text in (out, gpu_exposition()):
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                found.setdefault(s.name, []).append(dict(s.labels))
    return found


def gpu_exposition() -> str:
    """The real GPU collector's exposition text, polled from the fake NVML backend (tests/gpu_fake.py):
    two healthy GPUs (one power-capped) with an XID event counted, plus a poller whose library is
    missing, so that the init-error and NVML-error series exist too."""
    from gpu_fake import FakeGpu, FakeNvml
    from prometheus_client import CollectorRegistry, generate_latest

    from exporter.gpu.collector import GpuCollector
    from exporter.gpu.nvml import load_pynvml
    from exporter.gpu.poller import GpuPoller

    a, b = "GPU-aaaaaaaa-0000-0000-0000-000000000001", "GPU-bbbbbbbb-0000-0000-0000-000000000002"
    nv = FakeNvml([FakeGpu(a), FakeGpu(b, name="NVIDIA H200", reasons=0)])
    healthy = GpuPoller(lambda: nv, xid_events=False)
    missing = GpuPoller(lambda: load_pynvml("/nonexistent/libnvidia-ml.so.1"), xid_events=False)
    texts = []
    try:
        for poller in (healthy, missing):
            poller.run_cycle()
        healthy.xids[("0", a, "79")] = 1  # as the XID thread records an event (tests/test_gpu_poller.py)
        for poller in (healthy, missing):
            registry = CollectorRegistry(auto_describe=False)
            registry.register(GpuCollector(poller))
            texts.append(generate_latest(registry).decode())
    finally:
        for poller in (healthy, missing):
            poller.stop(timeout=5)
    assert nv.unmodeled == [], nv.unmodeled
    return "".join(texts)


def references(expr: str) -> list[tuple[str, list[tuple[str, str, str]]]]:
    """Metric names an expression reads (recording-rule names with ':' excluded), with matchers."""
    refs = []
    for m in _METRIC.finditer(expr):
        matchers = _MATCHER.findall(m.group(3) or "")
        refs.append((m.group(1), matchers))
    return refs


def check_references(where: str, expr: str) -> list[str]:
    """Problems with the metric names and fixed label values an expression uses (empty when fine)."""
    known = exporter_samples()
    problems = []
    for name, matchers in references(expr):
        if name not in known:
            problems.append(f"{where}: {name} is not in the exporter's output")
            continue
        for label, op, val in matchers:
            if label in TARGET_LABELS or op in ("!=", "!~") or "$" in val:
                continue
            values = {labels.get(label) for labels in known[name]}
            pattern = re.compile(val if op == "=~" else re.escape(val))
            if not any(v is not None and pattern.fullmatch(v) for v in values):
                problems.append(f"{where}: {name}{{{label}{op}{val!r}}} matches nothing (values: {sorted(v for v in values if v)})")
    return problems


# ------------------------------------------------------------------------------- the rule files


def _rules():
    for path in RULE_FILES:
        for group in yaml.safe_load(path.read_text())["groups"]:
            for rule in group["rules"]:
                yield path.name, group["name"], rule


def _alerts():
    return [r for _, _, r in _rules() if "alert" in r]


def test_rule_files_exist():
    assert {p.name for p in RULE_FILES} >= {"sglang-recording-rules.yml", "sglang-alerts.yml"}
    assert TEST_FILES


def test_committed_rule_files_are_the_generators_output():
    built = monitoring.rule_files(DEFAULT)
    assert sorted(built) == [p.name for p in RULE_FILES]
    for p in RULE_FILES:
        assert p.read_text() == built[p.name], f"{p.name} is stale: run python3 -m monitoring"


def test_the_group_idiom_is_written_once():
    """The sglang_group defaulting lives in monitoring/promql.py only; the YAML has it per raw read."""
    sources = "".join(p.read_text() for p in (ROOT / "monitoring").rglob("*.py"))
    assert sources.count('label_replace(') == 1
    assert (RULES_DIR / "sglang-recording-rules.yml").read_text().count("label_replace(") == 29


@pytest.mark.parametrize("path", RULE_FILES, ids=lambda p: p.name)
def test_promtool_check_rules(promtool, path):
    r = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS" in r.stdout


@pytest.mark.parametrize("path", TEST_FILES, ids=lambda p: p.name)
def test_promtool_test_rules(promtool, path):
    r = subprocess.run([promtool, "test", "rules", path.name], capture_output=True, text=True,
                       timeout=120, cwd=path.parent)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS" in r.stdout and "FAILED" not in r.stdout


def test_every_alert_has_a_firing_and_a_not_firing_case():
    firing, quiet = set(), set()
    for path in TEST_FILES:
        for case in yaml.safe_load(path.read_text())["tests"]:
            for t in case.get("alert_rule_test", []):
                (firing if t.get("exp_alerts") else quiet).add(t["alertname"])
    names = {a["alert"] for a in _alerts()}
    assert names - firing == set(), "alerts without a firing case"
    assert names - quiet == set(), "alerts without a not-firing case"
    assert (firing | quiet) - names == set(), "test cases for alerts that do not exist"


def test_alerts_follow_the_mixin_conventions():
    runbook = RUNBOOK.read_text()
    anchors = {re.sub(r"[^a-z0-9 -]", "", h.strip().lower()).replace(" ", "-")
               for h in re.findall(r"^#+ (.+)$", runbook, flags=re.M)}
    seen = set()
    for alert in _alerts():
        name = alert["alert"]
        assert re.fullmatch(r"SGLang[A-Z][A-Za-z0-9]+", name), name
        assert name not in seen, f"duplicate alert {name}"
        seen.add(name)
        assert alert["labels"]["severity"] in {"critical", "warning", "info"}, name
        ann = alert["annotations"]
        assert ann["summary"] and "{{" not in ann["summary"], f"{name}: summary must be static"
        assert "{{ $value" in ann["description"] or "{{ $labels" in ann["description"], name
        assert ann["runbook_url"] == f"{DEFAULT.runbook_base}#{name.lower()}", name
        assert re.fullmatch(r"https://[^\s#]+/docs/runbook\.md#[a-z0-9]+", ann["runbook_url"]), name
        assert name.lower() in anchors, f"{name}: no section '{name}' in docs/runbook.md"
        # Conditions need a for: so that they do not flap; events (XID, ECC) fire at once and hold.
        assert alert.get("for") or alert.get("keep_firing_for"), f"{name}: needs for: or keep_firing_for:"


def test_headline_alert_is_retractions_per_batch_above_5_percent_for_15m():
    alert = next(a for a in _alerts() if a["alert"] == "SGLangRetractionRatioHigh")
    assert alert["expr"].split() == ["group_dp_rank:sglang_scheduler_retractions_per_batch:ratio_rate5m", ">", "0.05"]
    assert alert["for"] == "15m"
    record = next(r for _, _, r in _rules() if r.get("record") == "group_dp_rank:sglang_scheduler_retractions_per_batch:ratio_rate5m")
    assert "group_dp_rank:sglang_scheduler_retractions:rate5m" in record["expr"]
    assert "group_dp_rank:sglang_scheduler_batches:rate5m > 0" in record["expr"]


def test_recording_rules_are_level_metric_operations():
    for _, _, rule in _rules():
        if "record" in rule:
            level, metric, ops = rule["record"].split(":")
            assert level and ops and metric.startswith("sglang_"), rule["record"]


def test_replicas_of_one_scheduler_are_merged_with_max_not_sum():
    """Raw scheduler series are first reduced with max over pods of a group (README: Replicas count once)."""
    for _, _, rule in _rules():
        expr = rule.get("expr", "")
        if "record" in rule and re.search(r"(?<![\w:])sglang_scheduler_", expr):
            assert "max by (namespace, job, sglang_group, dp_rank" in expr, rule["record"]
            assert 'label_replace' in expr and '"sglang_group", "$1", "instance"' in expr, rule["record"]


def test_every_metric_a_rule_reads_is_exported():
    problems = []
    for fname, group, rule in _rules():
        where = f"{fname}:{rule.get('record') or rule.get('alert')}"
        problems += check_references(where, rule["expr"])
        for text in rule.get("annotations", {}).values():
            problems += check_references(where + " (annotation)", text)
    assert not problems, "\n".join(problems)


def test_the_reference_check_catches_a_renamed_metric():
    assert check_references("x", 'rate(sglang_scheduler_retraction_total[5m])')
    assert check_references("x", 'sglang_scheduler_batches_total{phase="decoding"}')
    assert not check_references("x", 'sglang_scheduler_batches_total{phase="decode", sglang_group!=""}')
    assert CORPUS.is_dir()

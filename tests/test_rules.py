"""The Prometheus rule files: generated, promtool accepts them, every alert is tested both ways, names are real.

* the committed rule files equal what ``python3 -m monitoring`` gives from monitoring/config.py;
* ``promtool check rules`` on every rule file and ``promtool test rules`` on every test file;
* every alert has a promtool case where it fires and one where it must not (an ``exp_alerts: []``);
* every metric a rule reads exists in the real exporter's output (one-shot over the whole corpus; GPU
  names from the GPU collector run on the fake NVML backend), with the label values the rule selects;
  SGLang's own ``sglang:*`` names exist in the releases tests/native_metrics.py models (and the native
  series of the promtool tests have those releases' label shapes); the per-forward-pass names come
  from the FPM collector on decoded SGLang messages;
* every scheduler rule carries a ``source`` label; the three sources are joined on the scheduler
  identity of the config, never on job or instance;
* recording rules are named ``level:metric:operations``; alerts carry severity, summary, a templated
  description and an absolute runbook_url (the config's one base) whose section exists in docs/runbook.md.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
import yaml
import native_metrics
from conftest import CORPUS, ROOT
from rules_support import MATCHER, NATIVE, RULE_FILES, RULES_DIR, check_references, exporter_samples
from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, str(ROOT))  # monitoring/ builds files and is not installed with the package
import monitoring  # noqa: E402
from monitoring.config import DEFAULT  # noqa: E402

TEST_FILES = sorted((RULES_DIR / "tests").glob("*.test.yml"))
RUNBOOK = ROOT / "docs" / "runbook.md"

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
    """The label defaulting lives in monitoring/promql.py only; the YAML has it on every raw read of a
    target without sglang_group (the pod, else the instance, names the group)."""
    sources = "".join(p.read_text() for p in (ROOT / "monitoring").rglob("*.py"))
    assert len(re.findall(r"(?<!_)label_replace\(", sources)) == 1
    text = (RULES_DIR / "sglang-recording-rules.yml").read_text()
    ungrouped = len(re.findall(r'\{[^}]*sglang_group=""[^}]*\}', text))
    assert ungrouped > 40
    assert text.count('"sglang_group", "$1", "pod", "(.+)")') == ungrouped
    assert text.count('"sglang_group", "$1", "instance", "(.+)")') == ungrouped
    # SGLang's own series without dp_rank (one DP rank) get dp_rank="0" on every read per scheduler
    native_reads = 0
    for _, group, rule in _rules():
        if group == "sglang-scheduler.rules":
            reads = len(NATIVE.findall(rule["expr"]))
            assert rule["expr"].count('"dp_rank", "0", "dp_rank", "")') == reads, rule["record"]
            native_reads += reads
    assert native_reads > 20

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
    (record,) = [r for _, _, r in _rules() if r.get("record") == "group_dp_rank:sglang_scheduler_retractions_per_batch:ratio_rate5m"]
    expr = " ".join(record["expr"].split())
    # retractions: the log's events, else SGLang's retracted requests; batches: fpm, else log, else SGLang
    assert expr.index('retractions:rate5m{source="log"}') < expr.index('retracted_requests:rate5m{source="sglang_metrics"}')
    denominator = expr[expr.index("group_left"):]
    fpm, log, native = (denominator.index(f'batches:rate5m{{source="{s}"}} > 0') for s in ("fpm", "log", "sglang_metrics"))
    assert fpm < log < native
    assert "/ on (namespace, sglang_group, stage, dp_rank) group_left ()" in expr


def test_recording_rules_are_level_metric_operations():
    for _, _, rule in _rules():
        if "record" in rule:
            level, metric, ops = rule["record"].split(":")
            assert level and ops and metric.startswith("sglang_"), rule["record"]


def test_replicas_of_one_scheduler_are_merged_with_max_not_sum():
    """Raw scheduler series are first reduced with max over pods of a group (README: Replicas count once),
    SGLang's own over its copies per TP/PP/EP rank too; per scheduler or, for SGLang's request latency,
    per server; never merged or joined by job or instance (the server rules only sum one target's
    request labels, is_streaming and priority, before the max)."""
    for _, group, rule in _rules():
        expr = rule.get("expr", "")
        if "record" not in rule:
            continue
        if re.search(r"(?<![\w:])(sglang_scheduler_|sglang:)", expr):
            level = {"sglang-server.rules": "max by (namespace, sglang_group, le)",
                     "sglang-priority.rules": "max by (namespace, sglang_group, "}.get(
                group, "max by (namespace, sglang_group, stage, dp_rank")
            assert level in expr, rule["record"]
            assert '"sglang_group", "$1", "pod"' in expr and '"sglang_group", "$1", "instance"' in expr, rule["record"]
        for grouping in re.findall(r"\b(?:max by|on) \(([^)]*)\)", expr):
            labels = grouping.split(", ")
            assert "job" not in labels and "instance" not in labels, (rule["record"], grouping)


def test_every_scheduler_series_names_its_source():
    """Each rule sets its source label; the headline keeps the one of the series it chose."""
    sources = {}
    headlines = {"group_dp_rank:sglang_scheduler_retractions_per_batch:ratio_rate5m",
                 "group_stage:sglang_scheduler_dp_imbalance:ratio"}
    for _, _, rule in _rules():
        if rule.get("record") in headlines:
            assert "source" not in rule.get("labels", {})
            reads = re.findall(r"(\w+:\w+:\w+)(\{[^}]*\})?", rule["expr"])
            assert reads and all('source="' in matchers for _, matchers in reads), reads
        elif rule.get("record", "").startswith("namespace:"):  # the fleet views count schedulers of any source,
            assert "source" not in rule.get("labels", {})       # each read through its chosen series
            assert all(r.startswith("group_dp_rank:") for r in re.findall(r"\w+:\w+:\w+", rule["expr"]))
        elif "record" in rule:
            assert rule.get("labels", {}).get("source") in {"log", "fpm", "sglang_metrics"}, rule["record"]
            sources.setdefault(rule["record"], set()).add(rule["labels"]["source"])
    assert sources["group_dp_rank:sglang_scheduler_batches:rate5m"] == {"log", "fpm", "sglang_metrics"}
    assert sources["group_dp_rank:sglang_scheduler_retracted_requests_per_batch:ratio_rate5m"] == {"log", "sglang_metrics"}
    # one rule per name and source: the precedence picks among them, nothing else repeats a name
    rules = [(r["record"], tuple(sorted(r.get("labels", {}).items()))) for _, _, r in _rules() if "record" in r]
    assert len(rules) == len(set(rules))


def test_recording_names_stay_out_of_sglangs_rewritten_names():
    """SGLang's sglang:scheduler_{idle,process_cpu,stage}_seconds_total become sglang_scheduler_* behind
    its router or Ray: no rule of ours may use those names, and every rule name has the level's colons."""
    for _, _, rule in _rules():
        if "record" in rule:
            name = rule["record"]
            assert name.count(":") == 2, name
            assert not re.search(r"scheduler_(idle|process_cpu|stage)_seconds", name), name


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
    assert check_references("x", 'rate({__name__=~"sglang[:_]num_retracted_reqs_total"}[5m])')
    assert check_references("x", '{__name__=~"sglang[:_]cuda_graph_passes_total", mode=~"decode"}')
    assert not check_references("x", '{__name__=~"sglang[:_]cuda_graph_passes_total", mode=~"decode_.*"}')
    assert not check_references("x", '{__name__=~"sglang[:_]num_queue_reqs", priority="", sglang_group=""}')
    assert check_references("x", '{__name__=~"sglang[:_]num_queue_reqs", priority="high"}')
    assert check_references("x", "sglang:token_usages")
    assert not check_references("x", 'sglang_scheduler_forward_passes_total{mode="idle"}')
    assert check_references("x", 'sglang_scheduler_forward_passes_total{mode="extend"}')
    assert CORPUS.is_dir()


# ------------------------------------------------------------------------------- SGLang's own /metrics


_SERIES = re.compile(r"^sglang[:_](?!(?:scheduler|exporter|gpu|omni)_)(\w+)\{(.*)\}$")
#: Labels of the scrape (never SGLang's).
_SCRAPE = {"job", "instance", "namespace", "pod", "sglang_group"}


def test_native_series_of_the_promtool_tests_have_real_label_shapes():
    """Every sglang:* input series of the promtool tests has the label keys of a modelled release."""
    shapes = native_metrics.label_shapes()
    seen = 0
    for path in TEST_FILES:
        for case in yaml.safe_load(path.read_text())["tests"]:
            for series in case.get("input_series", []):
                m = _SERIES.match(series["series"])
                if not m:
                    continue
                keys = frozenset(k for k, _, _ in MATCHER.findall(m.group(2))) - _SCRAPE
                name = f"sglang:{m.group(1)}"
                assert (name, keys) in shapes, (path.name, case["name"], name, sorted(keys))
                seen += 1
    assert seen > 50


def test_sidecar_series_of_the_promtool_tests_have_real_label_shapes():
    """Every sglang_scheduler_* input series of the promtool tests has the label keys the exporter
    really writes (log and forward-pass stream alike), as Prometheus stores them: a label with an empty
    value is no label (plain SGLang's ``stage=""``)."""
    shapes = {(name, frozenset(k for k, v in labels.items() if v != "")) for name, seen in exporter_samples().items()
              for labels in seen}
    seen = 0
    for path in TEST_FILES:
        for case in yaml.safe_load(path.read_text())["tests"]:
            for series in case.get("input_series", []):
                m = re.match(r"^(sglang_scheduler_\w+)\{(.*)\}$", series["series"])
                if m:
                    keys = frozenset(k for k, _, _ in MATCHER.findall(m.group(2))) - _SCRAPE
                    assert (m.group(1), keys) in shapes, (path.name, case["name"], m.group(1), sorted(keys))
                    seen += 1
    assert seen > 50


def test_the_native_fake_is_sglangs_exposition():
    """tests/native_metrics.py writes what SGLang's prometheus_client writes: counters with _total and
    no _created, sglang: names in the classic text format, no dp_rank with one DP rank, counters on
    every TP rank, gauges on the first attention-TP rank of each DP group."""
    text = native_metrics.exposition(native_metrics.Shape("0.5.10", tp_size=4, dp_size=2))
    assert "# TYPE sglang:num_retracted_requests_total counter" in text and "_created" not in text
    by_name = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            by_name.setdefault(s.name, []).append(s.labels)
    assert {labels["tp_rank"] for labels in by_name["sglang:num_retracted_requests_total"]} == {"0", "1", "2", "3"}
    assert {labels["tp_rank"] for labels in by_name["sglang:num_running_reqs"]} == {"0", "2"}
    assert {(labels["tp_rank"], labels["dp_rank"]) for labels in by_name["sglang:token_usage"]} == {("0", "0"), ("2", "1")}
    one_dp = native_metrics.exposition(native_metrics.Shape("0.5.7", tp_size=2))
    assert "dp_rank" not in one_dp and "prefill_none" not in one_dp and "is_streaming" not in one_dp
    assert 'is_streaming="true"' in native_metrics.exposition(native_metrics.Shape("0.5.17"))


def test_the_rules_read_sglangs_names_in_either_spelling(tmp_path):
    """What Prometheus stores depends on the format it negotiates: the classic text format keeps
    ``sglang:``; under OpenMetrics with Prometheus 2's Accept header (no UTF-8 escaping), prometheus_client
    0.23+ writes the sample lines as ``sglang_`` (the HELP and TYPE lines keep the colon). Every name
    served either way is matched by the rules' selector, and by nothing of ours."""
    import socket
    import urllib.request

    server = native_metrics.busy(native_metrics.Shape("0.5.22", tp_size=2, dp_size=2, priority_scheduling=True))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = server.start(port)
    try:
        served = {}
        for accept in ("text/plain;version=0.0.4;q=0.5,*/*;q=0.1",  # Prometheus' classic text format
                       "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;"
                       "q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"):  # Prometheus 2's default
            request = urllib.request.Request(url, headers={"Accept": accept})
            with urllib.request.urlopen(request, timeout=5) as response:  # noqa: S310 - loopback only
                text = response.read().decode()
            served[accept] = {line.split("{")[0].split(" ")[0] for line in text.splitlines()
                              if line and not line.startswith("#")}
    finally:
        server.stop()
    classic, openmetrics = served.values()
    assert all(name.startswith("sglang:") for name in classic)
    assert {name.replace("sglang_", "sglang:", 1) for name in openmetrics} == classic
    selectors = set(re.findall(r'__name__=~"(sglang\[:_\]\w+)"', (RULES_DIR / "sglang-recording-rules.yml").read_text()))
    assert len(selectors) > 10
    for selector in selectors:
        (read,) = [name for name in classic if re.fullmatch(selector, name)]  # served, once per spelling
        assert [name for name in openmetrics if re.fullmatch(selector, name)] == [
            name for name in openmetrics if name.replace("sglang_", "sglang:", 1) == read]
        for ours in ("sglang_scheduler_batches_total", "sglang_exporter_build_info", "sglang_gpu_up"):
            assert not re.fullmatch(selector, ours)


"""monitoring/: one config drives the rules, the alerts and the dashboards; ``python3 -m monitoring``.

* every alert has its entry in the config and every entry an alert; the YAML carries the config's
  thresholds, durations and the one runbook base;
* a threshold changed in the config moves the expression and the description's words together;
* the scheduler identity is one line: with ``("stage", "dp_rank")`` (issue 13) every recording rule,
  alert and scheduler panel keeps stages apart, and promtool accepts the result;
* the command: ``--check`` on the committed tree, ``--runbook-base`` with ``--out``, a bad URL.
"""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys

import yaml
from conftest import ROOT

sys.path.insert(0, str(ROOT))  # monitoring/ builds files and is not installed with the package
import monitoring  # noqa: E402
from monitoring import alerts, dashboards, recording  # noqa: E402
from monitoring.config import DEFAULT  # noqa: E402


def _rules(text: str) -> list[dict]:
    return [r for g in yaml.safe_load(text)["groups"] for r in g["rules"]]


def _command(*args: str, cwd=ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "monitoring", *args], capture_output=True, text=True,
                          timeout=120, cwd=cwd)


def test_every_alert_is_tuned_in_the_config_and_carries_it():
    built = _rules(monitoring.rule_files()["sglang-alerts.yml"])
    assert {a["alert"] for a in built} == set(DEFAULT.alerts)
    for a in built:
        tuning = DEFAULT.alerts[a["alert"]]
        assert a.get("for") == tuning.for_ and a.get("keep_firing_for") == tuning.keep_firing_for, a["alert"]
        if tuning.threshold is not None:
            assert re.search(rf"[<>] {tuning.threshold:g}\b", a["expr"]), a["alert"]
        assert a["annotations"]["runbook_url"] == f"{DEFAULT.runbook_base}#{a['alert'].lower()}"


def test_a_threshold_moves_the_expression_and_the_words():
    tuned = dict(DEFAULT.alerts)
    tuned["SGLangRetractionRatioHigh"] = dataclasses.replace(tuned["SGLangRetractionRatioHigh"], threshold=0.02,
                                                             for_="30m")
    tuned["SGLangQueueWaitHigh"] = dataclasses.replace(tuned["SGLangQueueWaitHigh"], threshold=1)
    cfg = dataclasses.replace(DEFAULT, alerts=tuned)
    by_name = {a["alert"]: a for a in _rules(monitoring.rule_files(cfg)["sglang-alerts.yml"])}
    retraction = by_name["SGLangRetractionRatioHigh"]
    assert retraction["expr"].split()[-2:] == [">", "0.02"] and retraction["for"] == "30m"
    assert "for 30 minutes; the threshold is 2%." in retraction["annotations"]["description"]
    wait = by_name["SGLangQueueWaitHigh"]
    assert wait["expr"].split()[-2:] == [">", "1"] and "threshold 1s" in wait["annotations"]["description"]


def test_stages_are_a_one_line_change(promtool, tmp_path):
    """Issue 13 adds the label ``stage``: the recording rules keep stages apart, the alerts name the
    stage, the scheduler panels filter and group by it, and promtool accepts the rule files."""
    cfg = dataclasses.replace(DEFAULT, scheduler_labels=("stage", "dp_rank"))
    files = monitoring.rule_files(cfg)
    for rule in _rules(files["sglang-recording-rules.yml"]):
        if rule["record"].startswith(f"{cfg.fleet_level}:"):  # the fleet views aggregate the schedulers away
            assert set(re.findall(r"(?:max|count) by \(([^)]*)\)", rule["expr"])) == {"namespace"}, rule["record"]
            continue
        if "max by" in rule["expr"]:
            maxes = re.findall(r"max by \(([^)]*)\)", rule["expr"])
            # per scheduler, across the DP ranks of one stage, per server (latency), per server and priority
            assert all(m.startswith(("namespace, sglang_group, stage, dp_rank", "namespace, sglang_group, le",
                                     "namespace, sglang_group, priority"))
                       or m == "namespace, sglang_group, stage" for m in maxes), rule["record"]
        # per scheduler, across the ranks; a per-class rule joins its server (the queue split by priority)
        joins = ("namespace, sglang_group, stage, dp_rank", "namespace, sglang_group, stage",
                 *(("namespace, sglang_group",) if rule["record"].startswith("group_priority_class:") else ()))
        for on in re.findall(r"on \(([^)]*)\)", rule["expr"]):
            assert on in joins, rule["record"]
    scheduler = [a for a in _rules(files["sglang-alerts.yml"]) if "Scheduler" in a["annotations"]["description"]
                 or "scheduler {{ with $labels.stage" in a["annotations"]["description"]]
    assert len(scheduler) == 8
    for a in scheduler:
        assert "{{ with $labels.stage }}stage={{ . }} {{ end }}dp_rank={{ $labels.dp_rank }}" in \
            a["annotations"]["description"], a["alert"]
        for on in re.findall(r"on \(([^)]*)\)", a["expr"]):
            assert on == "namespace, sglang_group, stage, dp_rank", a["alert"]
    for name, text in files.items():
        path = tmp_path / name
        path.write_text(text)
        r = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stdout + r.stderr

    for name in ("sglang-scheduler.json", "sglang-capacity.json"):
        board = json.loads(dashboards.build(cfg)[name])
        assert "stage" in {v["name"] for v in board["templating"]["list"]}, name
        for p in [q for top in board["panels"] for q in (top, *top.get("panels", []))]:  # collapsed rows too
            for t in p.get("targets", []):
                if 'dp_rank=~"$dp_rank"' in t["expr"]:
                    assert t["expr"].count('stage=~"$stage"') == t["expr"].count('dp_rank=~"$dp_rank"'), (name, p["title"])
                for grouping in re.findall(r"by \(([^)]*)\)", t["expr"]):
                    if "dp_rank" in grouping:
                        assert "stage, dp_rank" in grouping, (name, p["title"], grouping)


def test_which_source_wins_is_the_config(promtool, tmp_path):
    """The order of Config.precedence is the order of the generated PromQL: put SGLang's pass counter
    before the log's estimate and the headline's denominator follows; every source of a figure has a
    place in its order."""
    def denominator(cfg) -> list[str]:
        (rule,) = [r for r in _rules(monitoring.rule_files(cfg)["sglang-recording-rules.yml"])
                   if r["record"] == cfg.record("retractions_per_batch", "ratio_rate{w}")]
        return re.findall(r'batches:rate5m\{source="(\w+)"\} > 0', rule["expr"].split("group_left")[1])

    assert denominator(DEFAULT) == ["fpm", "log", "sglang_metrics"]
    order = dict(DEFAULT.precedence)
    order["batches"] = ("fpm", "sglang_metrics", "log")
    cfg = dataclasses.replace(DEFAULT, precedence=order)
    assert denominator(cfg) == ["fpm", "sglang_metrics", "log"]
    path = tmp_path / "sglang-recording-rules.yml"
    path.write_text(monitoring.rule_files(cfg)["sglang-recording-rules.yml"])
    r = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert set(DEFAULT.precedence) == {"batches", "retractions", "batch_size", "kv_usage", "running_requests",
                                       "queue_requests", "queue_wait", "stale", "dp_imbalance", "recompute"}
    for figure, sources in DEFAULT.precedence.items():
        assert len(set(sources)) == len(sources) and set(sources) <= {"log", "fpm", "sglang_metrics"}, figure


def test_record_names_come_from_the_config():
    assert DEFAULT.record("retractions_per_batch", "ratio_rate{w}") == \
        "group_dp_rank:sglang_scheduler_retractions_per_batch:ratio_rate5m"
    names = [r.record for r in recording.recording_rules(DEFAULT)]
    assert len(names) == 74 and "group_dp_rank:sglang_scheduler_kv_capacity_requests:safe5m" in names
    assert DEFAULT.record_server("time_to_first_token_seconds", "histogram_quantile_rate{w}") == \
        "group:sglang_time_to_first_token_seconds:histogram_quantile_rate5m"
    assert {g.name for g in alerts.groups(DEFAULT)} == {"sglang-scheduler.alerts", "sglang-exporter.alerts",
                                                       "sglang-gpu.alerts", "sglang-omni.alerts",
                                                       "sglang-priority.alerts"}


def test_priority_classes_are_bounded_and_exclusive():
    """Every raw priority value SGLang may carry falls in exactly one named class of the config or in
    'other' (the last matching entry wins in the rules: no value may match two)."""
    for value in ("0", "1", "10", "1000", "-1", "-20", "01", "x", "-9223372036854775808", "9223372036854775807"):
        hits = [name for name, regex in DEFAULT.priority_classes if re.fullmatch(regex, value)]
        assert len(hits) <= 1, (value, hits)
    assert [n for n, r in DEFAULT.priority_classes if re.fullmatch(r, "10")] == ["high"]
    assert [n for n, r in DEFAULT.priority_classes if re.fullmatch(r, "0")] == ["default"]
    assert [n for n, r in DEFAULT.priority_classes if re.fullmatch(r, "-5")] == ["low"]
    assert not [n for n, r in DEFAULT.priority_classes if re.fullmatch(r, "01")]  # -> other
    # a request sent without a priority: SGLang's -sys.maxsize - 1 (sys.maxsize with low values first)
    for sentinel in ("-9223372036854775808", "9223372036854775807"):
        assert [n for n, r in DEFAULT.priority_classes if re.fullmatch(r, sentinel)] == ["unset"]


def test_check_passes_on_the_committed_tree():
    r = _command("--check")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout == ""


def test_runbook_base_option_writes_absolute_links_elsewhere(tmp_path):
    base = "https://git.example.org/acme/sglang-exporter/blob/v0.1.0/docs/runbook.md"
    r = _command("--runbook-base", base, "--out", str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr
    written = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert written == sorted(["sglang-recording-rules.yml", "sglang-alerts.yml", "sglang-oncall.json",
                              "sglang-scheduler.json", "sglang-gpu.json", "sglang-capacity.json"])
    built = _rules((tmp_path / "out" / "sglang-alerts.yml").read_text())
    assert len(built) == len(DEFAULT.alerts)
    for a in built:
        assert a["annotations"]["runbook_url"] == f"{base}#{a['alert'].lower()}"
    oncall = json.loads((tmp_path / "out" / "sglang-oncall.json").read_text())
    assert all(p["links"][0]["url"].startswith(base + "#") for p in oncall["panels"])  # the dashboard too
    committed = (ROOT / "deploy" / "prometheus" / "sglang-alerts.yml").read_text()
    assert base not in committed  # the checkout is untouched


def test_a_relative_runbook_base_is_refused_in_one_line(tmp_path):
    r = _command("--runbook-base", "docs/runbook.md", "--out", str(tmp_path / "out"))
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "--runbook-base" in r.stderr and "'docs/runbook.md'" in r.stderr
    assert not (tmp_path / "out").exists()


def test_every_alert_is_listed_in_the_alerts_page_and_the_thresholds_table():
    """docs/alerts.md's list and runbook.md's threshold table name every shipped alert (a new alert
    left out of both was missed by a reader of the docs: SGLangDPRankImbalance, SGLangPriorityStarved)."""
    rules = yaml.safe_load((ROOT / "deploy" / "prometheus" / "sglang-alerts.yml").read_text())
    alerts = {r["alert"] for g in rules["groups"] for r in g["rules"] if "alert" in r}
    assert len(alerts) > 20
    page = (ROOT / "docs" / "alerts.md").read_text().split("\n## Alerts\n", 1)[1].split("\n## ", 1)[0]
    assert sorted(a for a in alerts if f"`{a}`" not in page) == []
    runbook = (ROOT / "docs" / "runbook.md").read_text().split("\n## Thresholds\n", 1)[1].split("\n## ", 1)[0]
    rows = {line.split("|")[1].strip() for line in runbook.splitlines() if line.startswith("| SGLang")}
    assert sorted(alerts - rows - {"SGLangExporterDown", "SGLangExporterLogFileMissing", "SGLangGPUNVMLDown",
                                    "SGLangGPUXidErrors", "SGLangGPUMemoryErrors"}) == []

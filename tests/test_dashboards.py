"""The Grafana dashboards: generated, valid, conventional, readable, and reading only metrics that exist.

* the committed JSON equals what ``python3 -m monitoring`` builds (monitoring/dashboards/, Grafana's
  foundation SDK);
* valid JSON, stable unique uids, the datasource/namespace/pod and dp_rank (or gpu) variables;
* every panel has the ``${datasource}`` variable as data source (panel and targets), a unit and a
  description; every rate/increase uses ``$__rate_interval``;
* every expression parses (``promtool check rules`` on the expressions with the variables filled in)
  and every metric it reads is in the real exporter's output; recording rules it reads exist;
* the scheduler dashboard opens with the on-call row (retraction share vs the alert threshold, KV
  occupancy, decode batch p50 as a share of the ceiling, mean queue wait), coloured by the config's
  thresholds; no two lines plot the same expression; units match what is drawn (bytes only for byte
  metrics, ratios on ratio axes, never mixed with counts); panels tile the 24-column grid.
"""

from __future__ import annotations

import json
import re
import subprocess

import pytest
import yaml
from conftest import ROOT
from rules_support import RULE_FILES, check_references

from monitoring import dashboards
from monitoring.config import DEFAULT

GRAFANA = ROOT / "grafana"
FILES = sorted(GRAFANA.glob("*.json"))
UIDS = {"sglang-oncall.json": "sglang-oncall", "sglang-scheduler.json": "sglang-scheduler", "sglang-gpu.json": "sglang-gpu",
        "sglang-capacity.json": "sglang-capacity"}
#: Values the variables take when an expression is checked outside Grafana.
FILL = {"$__rate_interval": "1m", "$safety_factor": "0.7", "$namespace": ".*", "$pod": ".*",
        "$stage": ".*", "$dp_rank": ".*", "$gpu": ".*", "$sglang_group": ".*", "$source": ".*"}


def _dashboards() -> dict[str, dict]:
    return {p.name: json.loads(p.read_text()) for p in FILES}


def _panels(d: dict):
    for p in d["panels"]:
        if p["type"] != "row":
            yield p
        yield from (q for q in p.get("panels", []) if q["type"] != "row")


def _all(d: dict):
    """Every panel, rows included, open or inside a collapsed row."""
    for p in d["panels"]:
        yield p
        yield from p.get("panels", [])


def _exprs():
    for name, d in _dashboards().items():
        for p in _panels(d):
            for t in p["targets"]:
                yield f"{name}: {p['title']} [{t['refId']}]", t["expr"]


def fill(expr: str) -> str:
    for var, val in sorted(FILL.items(), key=lambda kv: -len(kv[0])):
        expr = expr.replace(var, val)
    assert "$" not in expr, expr
    return expr


def test_committed_json_is_the_builders_output():
    built = dashboards.build(DEFAULT)
    assert sorted(built) == [p.name for p in FILES]
    for p in FILES:
        assert p.read_text() == built[p.name], f"{p.name} is stale: run python3 -m monitoring"


def test_stable_unique_uids_and_variables():
    boards = _dashboards()
    assert {name: d["uid"] for name, d in boards.items()} == UIDS
    for name, d in boards.items():
        variables = {v["name"]: v for v in d["templating"]["list"]}
        assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
        need = {"namespace", "pod", "gpu" if name == "sglang-gpu.json" else "dp_rank"}
        assert need <= set(variables), name
        for v in need:
            assert variables[v]["datasource"]["uid"] == "${datasource}", (name, v)
            assert variables[v]["includeAll"] and variables[v]["allValue"] == ".*", (name, v)
        assert d["title"].startswith("SGLang / ") and d["description"]
    cap = {v["name"]: v for v in boards["sglang-capacity.json"]["templating"]["list"]}
    assert cap["safety_factor"]["current"]["value"] == "0.7"


def test_every_panel_has_datasource_unit_and_description():
    for name, d in _dashboards().items():
        ids = [p["id"] for p in _all(d)]
        assert len(ids) == len(set(ids)), name
        titles = [p["title"] for p in _all(d)]
        assert len(titles) == len(set(titles)), f"{name}: two panels with one title"
        for p in _panels(d):
            where = f"{name}: {p['title']}"
            assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, where
            assert p["targets"], where
            assert all(t["datasource"]["uid"] == "${datasource}" for t in p["targets"]), where
            assert p["fieldConfig"]["defaults"].get("unit"), where
            assert 20 < len(p.get("description", "")) <= 400, where  # 539 before: read at a glance


def test_rates_use_rate_interval():
    for where, expr in _exprs():
        for m in re.finditer(r"\b(rate|increase|irate)\((.*?)\[([^\]]+)\]", expr):
            assert m.group(3) == "$__rate_interval", f"{where}: {m.group(0)}"


def test_the_scheduler_dashboard_answers_the_method():
    titles = {p["title"] for p in _panels(_dashboards()["sglang-scheduler.json"])}
    for needed in ("Decode batch size percentiles vs the configured ceiling", "Decode batch size distribution",
                   "Retraction ratio vs the 5% line", "KV cache usage", "Recompute share (\"fake throughput\")",
                   "Effective throughput", "Queue depth", "Queue wait", "Cache-hit ratio",
                   "Speculative accept length", "PD queues"):
        assert needed in titles
    ratio = next(p for p in _panels(_dashboards()["sglang-scheduler.json"]) if p["title"] == "Retraction ratio vs the 5% line")
    assert [s["value"] for s in ratio["fieldConfig"]["defaults"]["thresholds"]["steps"]] == [None, 0.05]


def test_every_expression_parses(promtool, tmp_path):
    rules = [{"record": f"dashboard_expr_{i}", "expr": fill(expr)} for i, (_, expr) in enumerate(_exprs())]
    path = tmp_path / "dashboard-exprs.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboards", "rules": rules}]}))
    r = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def test_every_metric_a_panel_reads_is_exported():
    recorded = {r["record"] for p in RULE_FILES for g in yaml.safe_load(p.read_text())["groups"]
                for r in g["rules"] if "record" in r}
    problems = []
    for where, expr in _exprs():
        problems += check_references(where, expr)
        for name in re.findall(r"[a-z_]+:[a-z0-9_]+:[a-z0-9_]+", expr):
            if name not in recorded:
                problems.append(f"{where}: recording rule {name} does not exist")
    assert not problems, "\n".join(problems)


def test_file_provisioning():
    provider = yaml.safe_load((GRAFANA / "provisioning" / "dashboards" / "sglang.yaml").read_text())
    assert provider["apiVersion"] == 1
    (p,) = provider["providers"]
    assert p["type"] == "file" and p["options"]["path"]
    ds = yaml.safe_load((GRAFANA / "provisioning" / "datasources" / "prometheus.yaml").read_text())
    assert ds["datasources"][0]["type"] == "prometheus"


@pytest.mark.parametrize("name", sorted(UIDS))
def test_dashboard_json_is_valid(name):
    d = json.loads((GRAFANA / name).read_text())
    assert d["schemaVersion"] >= 36 and isinstance(d["panels"], list)


# ------------------------------------------------------------------ read in five seconds (issue 11 item 7)


def _steps(panel: dict) -> list[tuple[float | None, str]]:
    return [(s["value"], s["color"]) for s in panel["fieldConfig"]["defaults"]["thresholds"]["steps"]]


def _on_call_row(board: dict) -> list[dict]:
    """The panels between the first row header and the second."""
    rows = [p for p in board["panels"] if p["type"] == "row"]
    top, below = rows[0]["gridPos"]["y"], rows[1]["gridPos"]["y"]
    return [p for p in board["panels"] if p["type"] != "row" and top < p["gridPos"]["y"] < below]


def test_scheduler_dashboard_opens_with_the_on_call_row():
    """Four stat panels read the normalised recording rules, one value per scheduler from the most exact
    source, as the alerts take it: they work with the sidecar, SGLang's own /metrics, or both."""
    board = _dashboards()["sglang-scheduler.json"]
    first = board["panels"][0]
    assert first["type"] == "row" and first["gridPos"]["y"] == 0
    top = _on_call_row(board)
    assert [p["type"] for p in top] == ["stat"] * 4
    assert sum(p["gridPos"]["w"] for p in top) == 24 and {p["gridPos"]["y"] for p in top} == {1}
    retraction, kv, batch, wait = top
    a = DEFAULT.alerts
    sel = 'namespace=~"$namespace", sglang_group=~"$sglang_group", stage=~"$stage", dp_rank=~"$dp_rank"'
    on = " or on (namespace, sglang_group, stage, dp_rank) "

    assert retraction["title"] == "Retraction share (5% rule)"
    assert [t["expr"] for t in retraction["targets"]] == [f"group_dp_rank:sglang_scheduler_retractions_per_batch:ratio_rate5m{{{sel}}}"]
    assert retraction["targets"][0]["legendFormat"] == "{{sglang_group}} {{stage}} dp{{dp_rank}} ({{source}})"
    assert retraction["fieldConfig"]["defaults"]["unit"] == "percentunit"
    assert _steps(retraction) == [(None, "green"), (a["SGLangRetractionRatioHigh"].threshold, "red")] == [(None, "green"), (0.05, "red")]

    assert kv["title"] == "KV cache occupancy"
    assert [t["expr"] for t in kv["targets"]] == [on.join(f'group_dp_rank:sglang_scheduler_kv_usage:max{{{sel}, source="{s}"}}'
                                                          for s in ("log", "sglang_metrics"))]
    assert kv["fieldConfig"]["defaults"]["unit"] == "percentunit" and kv["fieldConfig"]["defaults"]["max"] == 1
    assert _steps(kv)[-1] == (a["SGLangKVCacheSaturated"].threshold, "red")

    assert batch["title"] == "Decode batch p50 / ceiling"
    (expr,) = [t["expr"] for t in batch["targets"]]
    assert expr == ("(" + on.join(f'group_dp_rank:sglang_scheduler_decode_batch_size:histogram_quantile_rate5m{{{sel}, '
                                  f'source="{s}", quantile="0.5"}}' for s in ("fpm", "log")) + ") / on (namespace, "
                    f'sglang_group, stage, dp_rank) (group_dp_rank:sglang_scheduler_max_running_requests:max{{{sel}, source="log"}} > 0)')
    assert batch["fieldConfig"]["defaults"]["unit"] == "percentunit" and batch["fieldConfig"]["defaults"]["max"] == 1

    assert wait["title"] == "Queue wait (as alerted)"
    (expr,) = [t["expr"] for t in wait["targets"]]
    assert expr == (f'group_dp_rank:sglang_scheduler_queue_wait_seconds:histogram_quantile_rate5m{{{sel}, '
                    f'source="sglang_metrics", quantile="0.9"}}{on}'
                    f'group_dp_rank:sglang_scheduler_queue_wait_seconds:mean_rate5m{{{sel}, source="log"}}')
    assert wait["fieldConfig"]["defaults"]["unit"] == "s"
    assert _steps(wait)[-1] == (a["SGLangQueueWaitHigh"].threshold, "red")

    for p in top:
        assert p["options"]["reduceOptions"]["calcs"] == ["lastNotNull"], p["title"]


def test_latency_beside_the_batch_size():
    """Issue 15: P50/P99 TTFT, ITL and E2E from SGLang's own metrics next to the actual batch size and its
    ceiling, on one row (one time axis); the sidecar's decode step time stands in, named an estimate."""
    board = _dashboards()["sglang-scheduler.json"]
    rows = [p for p in board["panels"] if p["type"] == "row"]
    (latency_row,) = [r for r in rows if r["title"].startswith("Latency beside the batch size")]
    line = [p for p in board["panels"] if p["type"] != "row" and p["gridPos"]["y"] == latency_row["gridPos"]["y"] + 1]
    assert [p["title"] for p in line] == ["Actual batch size and its ceiling", "Time to first token",
                                          "Inter-token latency and time per output token", "End-to-end request latency"]
    batch, ttft, itl, e2e = ({t["legendFormat"]: t["expr"] for t in p["targets"]} for p in line)
    assert any("max_running_requests:max" in e for e in batch.values()) and \
        any('quantile="0.99"' in e for e in batch.values())
    for panel, metric in ((ttft, "time_to_first_token"), (itl, "inter_token_latency"), (e2e, "e2e_request_latency"),
                          (itl, "request_time_per_output_token")):  # SGLang 0.5.22's per-request TPOT
        quantiles = {e.split('quantile="')[1].split('"')[0] for e in panel.values() if f"group:sglang_{metric}" in e}
        assert quantiles == {"0.5", "0.99"}, metric
    (estimate,) = [legend for legend, e in itl.items() if "decode_step_seconds:estimate5m" in e]
    assert "estimate" in estimate


def test_dashboard_thresholds_follow_the_config():
    """A threshold changed in monitoring/config.py moves the coloured lines with the alert."""
    import dataclasses

    alerts = dict(DEFAULT.alerts)
    alerts["SGLangRetractionRatioHigh"] = dataclasses.replace(alerts["SGLangRetractionRatioHigh"], threshold=0.02)
    cfg = dataclasses.replace(DEFAULT, alerts=alerts)
    board = json.loads(dashboards.build(cfg)["sglang-scheduler.json"])
    share = _on_call_row(board)[0]
    assert share["title"] == "Retraction share (2% rule)" and _steps(share)[-1] == (0.02, "red")
    line = next(p for p in _panels(board) if p["title"] == "Retraction ratio vs the 2% line")
    assert _steps(line)[-1] == (0.02, "red")


def _normal(expr: str) -> str:
    return re.sub(r"\s+", "", expr)


def test_no_two_lines_plot_the_same_expression():
    """Within a panel no target repeats another; across a dashboard no two graph lines are the same
    expression (a stat panel may show the latest value of a line drawn below it)."""
    for name, board in _dashboards().items():
        seen: dict[str, str] = {}
        for p in _panels(board):
            exprs = [_normal(t["expr"]) for t in p["targets"]]
            assert len(exprs) == len(set(exprs)), f"{name}: {p['title']} draws one expression twice"
            if p["type"] == "stat":
                continue
            for e in exprs:
                assert e not in seen, f"{name}: {p['title']} and {seen[e]} draw the same line"
                seen[e] = p["title"]


_RAW = re.compile(r"(?<![\w:])(sglang_(?:scheduler|exporter|gpu)_\w+?)(?:_bucket|_sum|_count)?(?![\w:])")
_BARE = re.compile(r"(sglang_\w+)\{[^}]*\}(?: > 0)?")


def _kind(expr: str) -> str:
    """What a target draws: 'factor' (max over mean across the DP ranks), 'ratio' (a _ratio gauge, a
    ratio recording rule or a quotient), 'bytes' (only _bytes metrics, no quotient), else 'other'."""
    names = set(_RAW.findall(expr))
    if re.search(r":max_over_mean_dp_rank\b|_dp_imbalance:ratio\b", expr):
        return "factor"  # max / mean across the DP ranks: 1 and up, never a share
    if re.search(r":(?:\w*ratio\w*)\b|_usage(?:_observed)?:", expr) or (_BARE.fullmatch(expr) and expr.split("{")[0].endswith("_ratio")):
        return "ratio"
    if " / " in expr:
        return "ratio" if all(n.endswith("_bytes") for n in names) else "quotient"
    if names and all(n.endswith("_bytes") for n in names):
        return "bytes"
    if names and all(n.endswith("_ratio") for n in names):
        return "ratio"
    return "other"


def test_units_match_what_is_drawn():
    """Bytes axes draw only byte metrics; ratio gauges sit on percentunit axes; a percentunit axis
    draws no count (queue counts and ratios are separate panels)."""
    for name, board in _dashboards().items():
        for p in _panels(board):
            where = f"{name}: {p['title']}"
            unit = p["fieldConfig"]["defaults"]["unit"]
            kinds = {_kind(t["expr"]) for t in p["targets"]}
            if unit == "bytes":
                assert kinds == {"bytes"}, (where, kinds)
            if "bytes" in kinds:
                assert unit == "bytes", (where, unit)
            if "ratio" in kinds:
                assert unit == "percentunit" and kinds <= {"ratio", "quotient"}, (where, unit, kinds)
            if unit == "percentunit":
                assert "other" not in kinds and "bytes" not in kinds and "factor" not in kinds, (where, kinds)
            if "factor" in kinds:
                assert unit == "none" and kinds == {"factor"}, (where, unit, kinds)


def test_units_check_catches_mixed_panels():
    assert _kind('group_stage:sglang_scheduler_kv_usage:max_over_mean_dp_rank{namespace=~"$namespace"}') == "factor"
    assert _kind('sglang_gpu_processes{gpu=~"$gpu"}') == "other"
    assert _kind('sglang_gpu_process_memory_used_bytes{gpu=~"$gpu"}') == "bytes"
    assert _kind('sglang_scheduler_pd_preallocated_usage_ratio{pod=~"$pod"}') == "ratio"
    assert _kind('sglang_scheduler_pd_queue_requests{pod=~"$pod"}') == "other"
    assert _kind("1 - sglang_gpu_memory_free_bytes{} / sglang_gpu_memory_total_bytes{}") == "ratio"


def test_panels_tile_the_grid():
    """Every panel lies inside the 24 columns and no two overlap (the SDK's auto layout would let a
    line of panels wider than 24 run off the grid)."""
    for name, board in _dashboards().items():
        # the open layout, and each collapsed row's panels as they lie once it is opened
        layouts = [board["panels"]] + [p["panels"] for p in board["panels"] if p.get("collapsed")]
        for layout in layouts:
            boxes = []
            for p in layout:
                g = p["gridPos"]
                assert 0 <= g["x"] and g["x"] + g["w"] <= 24 and g["h"] > 0, (name, p["title"], g)
                for title, o in boxes:
                    apart = (g["x"] + g["w"] <= o["x"] or o["x"] + o["w"] <= g["x"]
                             or g["y"] + g["h"] <= o["y"] or o["y"] + o["h"] <= g["y"])
                    assert apart, f"{name}: {p['title']} overlaps {title}"
                boxes.append((p["title"], g))


def test_on_call_row_figures_on_known_series(promtool, tmp_path):
    """promtool evaluates the four stat queries, through the recording rules, on series with known
    answers. Pod p (the sidecar only): 3 retractions per 100 batches, KV at 97%, a decode batch p50 of
    80 (10 steps per minute, half in the (77, 80] bucket, half in (80, 84]) under a ceiling of 2048, and 120 request-seconds of
    waiting per 30 admissions. Pod q (SGLang's own /metrics only, one DP rank, two TP ranks): 5 retracted
    requests per 100 decode passes, token_usage 0.5, a queue-time p90 of 1.8 s."""
    top = {p["title"]: p["targets"][0]["expr"] for p in _on_call_row(_dashboards()["sglang-scheduler.json"])}
    pod = 'namespace="ns", pod="p", dp_rank="0"'
    series = {
        f'sglang_scheduler_batches_total{{{pod}, phase="decode"}}': "0+100x20",
        f'sglang_scheduler_batches_total{{{pod}, phase="prefill"}}': "0x20",
        f"sglang_scheduler_retractions_total{{{pod}}}": "0+3x20",
        f"sglang_scheduler_kv_usage_ratio{{{pod}}}": "0.97x20",
        f'sglang_scheduler_batch_size_bucket{{{pod}, phase="decode", le="77.0"}}': "0x20",
        f'sglang_scheduler_batch_size_bucket{{{pod}, phase="decode", le="80.0"}}': "0+5x20",
        f'sglang_scheduler_batch_size_bucket{{{pod}, phase="decode", le="84.0"}}': "0+10x20",
        f'sglang_scheduler_batch_size_bucket{{{pod}, phase="decode", le="+Inf"}}': "0+10x20",
        f"sglang_scheduler_max_running_requests{{{pod}}}": "2048x20",
        f"sglang_scheduler_queue_request_seconds_total{{{pod}}}": "0+120x20",
        f"sglang_scheduler_admitted_requests_total{{{pod}}}": "0+30x20",
    }
    for tp in ("0", "1"):
        native = f'namespace="ns", pod="q", model_name="m", engine_type="unified", tp_rank="{tp}", pp_rank="0", moe_ep_rank="0"'
        series[f'sglang:cuda_graph_passes_total{{{native}, mode="decode_cuda_graph"}}'] = "0+100x20"
        series[f"sglang:num_retracted_requests_total{{{native}}}"] = "0+5x20"
        for le, v in (("1.0", 30), ("2.0", 60), ("+Inf", 60)):
            series[f'sglang:queue_time_seconds_bucket{{{native}, le="{le}"}}'] = f"0+{v}x20"
    series['sglang:token_usage{namespace="ns", pod="q", model_name="m", engine_type="unified", tp_rank="0", pp_rank="0", moe_ep_rank="0"}'] = "0.5x20"
    p = 'namespace="ns", sglang_group="p", dp_rank="0", source="log"'
    q = 'namespace="ns", sglang_group="q", dp_rank="0", source="sglang_metrics"'
    want = {"Retraction share (5% rule)": [(f"group_dp_rank:sglang_scheduler_retractions_per_batch:ratio_rate5m{{{p}}}", 0.03),
                                           (f"group_dp_rank:sglang_scheduler_retractions_per_batch:ratio_rate5m{{{q}}}", 0.05)],
            "KV cache occupancy": [(f"group_dp_rank:sglang_scheduler_kv_usage:max{{{p}}}", 0.97),
                                   (f"group_dp_rank:sglang_scheduler_kv_usage:max{{{q}}}", 0.5)],
            "Decode batch p50 / ceiling": [('{namespace="ns", sglang_group="p", dp_rank="0"}', 80 / 2048)],
            "Queue wait (as alerted)": [(f"group_dp_rank:sglang_scheduler_queue_wait_seconds:mean_rate5m{{{p}}}", 4.0),
                           ("group_dp_rank:sglang_scheduler_queue_wait_seconds:histogram_quantile_rate5m"
                            f'{{{q}, quantile="0.9"}}', 1.8)]}
    assert sorted(top) == sorted(want)
    tests = [{"interval": "1m",
              "input_series": [{"series": k, "values": v} for k, v in series.items()],
              "promql_expr_test": [{"expr": fill(top[title].replace("$__rate_interval", "5m")), "eval_time": "10m",
                                    "exp_samples": [{"labels": labels, "value": value} for labels, value in samples]}
                                   for title, samples in want.items()]}]
    path = tmp_path / "on-call-row.test.yml"
    path.write_text(yaml.safe_dump({"rule_files": [str(f) for f in RULE_FILES], "evaluation_interval": "1m",
                                    "tests": tests}))
    r = subprocess.run([promtool, "test", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def test_dp_ranks_and_priority_classes_rows():
    """Issue 26: the DP ranks of a server side by side (running, queued, KV usage per rank from the most
    exact source) with their imbalance over time against SGLangDPRankImbalance's threshold; per priority
    class the queued and running requests, the first tokens and the TTFT p99 against
    SGLangPriorityStarved's threshold."""
    board = _dashboards()["sglang-scheduler.json"]
    panels = {p["title"]: p for p in _panels(board)}

    def exprs(title: str) -> str:
        return "\n".join(t["expr"] for t in panels[title]["targets"])

    for title, rule in (("Running requests per DP rank", "running_requests"), ("Queued requests per DP rank",
                        "queue_requests"), ("KV cache usage per DP rank", "kv_usage")):
        e = exprs(title)
        assert f"group_dp_rank:sglang_scheduler_{rule}:max{{" in e and 'source="log"' in e and \
            'source="sglang_metrics"' in e, title
    over_time = panels["DP imbalance over time (max / mean across the ranks)"]
    e = exprs(over_time["title"])
    assert "group_stage:sglang_scheduler_dp_imbalance:ratio{" in e and "dp_rank=~" not in e  # one line per server
    for rule in ("running_requests", "queue_requests", "kv_usage"):
        assert f"group_stage:sglang_scheduler_{rule}:max_over_mean_dp_rank{{" in e
    steps = over_time["fieldConfig"]["defaults"]["thresholds"]["steps"]
    assert [s["value"] for s in steps] == [None, DEFAULT.alerts["SGLangDPRankImbalance"].threshold]
    e = exprs("Queued and running requests per priority class")
    assert "group_priority_class:sglang_num_queue_reqs:sum{" in e and "group_priority_class:sglang_num_running_reqs:sum{" in e
    ttft = panels["Time to first token per priority class"]
    assert 'quantile="0.99"' in exprs(ttft["title"])
    steps = ttft["fieldConfig"]["defaults"]["thresholds"]["steps"]
    assert [s["value"] for s in steps] == [None, DEFAULT.alerts["SGLangPriorityStarved"].threshold]
    assert "{{priority_class}}" in "".join(t["legendFormat"] for t in ttft["targets"])


def test_on_call_dashboard_is_one_screen_and_every_panel_links_its_runbook_section():
    """grafana/sglang-oncall.json: at most 16 panels, no rows, on one screen (28 grid units high, under
    the ~30 of a 1080p display), short descriptions; each panel links to the runbook section of an
    alert (a heading of docs/runbook.md) and to the scheduler dashboard; the four questions have a
    panel each: retractions vs the 5% line, bounded by KV or by the ceiling, the queue, which DP rank."""
    from monitoring.dashboards.oncall import MAX_DESCRIPTION, MAX_PANELS

    board = _dashboards()["sglang-oncall.json"]
    panels = board["panels"]
    assert 1 <= len(panels) <= MAX_PANELS == 16
    assert all(p["type"] != "row" for p in panels)
    assert max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in panels) <= 28
    headings = {line[3:].strip().lower() for line in (ROOT / "docs" / "runbook.md").read_text().splitlines()
                if line.startswith("## ")}
    for p in panels:
        assert len(p["description"]) <= MAX_DESCRIPTION, p["title"]
        runbook, scheduler = p["links"]
        base, _, anchor = runbook["url"].partition("#")
        assert base == DEFAULT.runbook_base and anchor in headings, (p["title"], runbook["url"])
        assert runbook["title"].lower() == f"runbook: {anchor}"
        assert scheduler["url"] == "/d/sglang-scheduler"
    titles = " | ".join(p["title"] for p in panels)
    for words in ("5% line", "Bounded by KV or by the ceiling", "Waiting requests", "Which DP rank", "Which pool"):
        assert words in titles, words
    # The other dashboards link to it.
    for name, other in _dashboards().items():
        if name != "sglang-oncall.json":
            assert "/d/sglang-oncall" in {link["url"] for link in other["links"]}, name


def test_the_runbook_base_of_the_config_reaches_every_generated_file():
    """monitoring/config.py's runbook_base is carried by every alert's runbook_url and every on-call
    panel's link; a config with another base changes all of them and leaves no default one behind."""
    import dataclasses

    import monitoring

    mine = "https://wiki.example.org/sglang/runbook"
    built = monitoring.outputs(dataclasses.replace(DEFAULT, runbook_base=mine))
    board = json.loads(next(text for rel, text in built.items() if rel.endswith("sglang-oncall.json")))
    assert all(p["links"][0]["url"].startswith(mine + "#") for p in board["panels"])
    [alert_file] = [text for rel, text in built.items() if rel.endswith("sglang-alerts.yml")]
    urls = [r["annotations"]["runbook_url"] for g in yaml.safe_load(alert_file)["groups"] for r in g["rules"]]
    assert len(urls) >= 20 and all(u.startswith(mine + "#") for u in urls)
    assert not [rel for rel, text in built.items() if DEFAULT.runbook_base in text]


def test_the_scheduler_dashboard_opens_on_two_rows_and_keeps_the_rest_one_click_away():
    """Before, all 13 rows of 60 panels were open. Now the at-a-glance and latency rows are, every
    later row is collapsed (its panels inside it, below its header once opened) and no panel is lost."""
    from monitoring.dashboards import OPEN_ROWS

    board = _dashboards()["sglang-scheduler.json"]
    rows = [p for p in board["panels"] if p["type"] == "row"]
    assert OPEN_ROWS["scheduler"] == 2 and [r["collapsed"] for r in rows[:2]] == [False, False]
    assert len(rows) > 2 and all(r["collapsed"] and r["panels"] for r in rows[2:])
    assert [r["gridPos"]["y"] for r in rows[2:]] == list(range(rows[2]["gridPos"]["y"], rows[2]["gridPos"]["y"] + len(rows) - 2))
    for r in rows[2:]:
        assert min(p["gridPos"]["y"] for p in r["panels"]) == r["gridPos"]["y"] + 1, r["title"]
    assert sum(1 for _ in _all(board)) == 60 and sum(1 for _ in _panels(board)) == 47  # 13 rows, 47 graphs
    open_panels = [p for p in board["panels"] if p["type"] != "row"]
    assert len(open_panels) == 8

"""The shipped rules on what real SGLang servers printed (tests/real_series/, the test bed's records).

Each test turns real scrapes (one a minute, in order) into promtool input series and checks the
recorded figures against the same figures taken from the scrapes directly: the priority classes
(the request sent without a priority is class ``unset`` on both sides), the recompute share from
SGLang's own counters against the sidecar's, the per-request TPOT and per-class TTFT quantiles, and
the DP-rank imbalance of a ``--dp-size 2`` server.
"""

from __future__ import annotations

import math
import subprocess

import pytest
import yaml
from conftest import ROOT, samples
from rules_support import RULE_FILES

REAL_SERIES = ROOT / "tests" / "real_series"
_TARGET = {"job": "sglang", "instance": "10.0.0.7:30000", "namespace": "llm", "pod": "sglang-real"}


def _real_input_series(directory, scrapes: tuple[str, ...]) -> tuple[list[dict], list[dict]]:
    """The scrapes of one real run (one a minute, in order) as promtool input series, and each
    scrape's samples ``{(name, labels): value}``."""
    taken = [samples((directory / f"{name}.prom").read_text()) for name in scrapes]
    keys = sorted({key for scrape in taken for key in scrape})
    series = []
    for name, labels in keys:
        text = ", ".join(f'{k}="{v}"' for k, v in (*_TARGET.items(), *labels))
        values = " ".join(f"{scrape[(name, labels)]:g}" if (name, labels) in scrape else "_" for scrape in taken)
        series.append({"series": f"{name}{{{text}}}", "values": values})
    return series, taken


@pytest.mark.parametrize("version", ["0.5.18", "0.5.23"])
def test_priority_classes_of_a_real_sglang_server(promtool, tmp_path, version):
    """The per-class rules on what a real SGLang server printed with --enable-priority-scheduling
    (test bed scenario ``priority``: requests at priorities 0 and 10, and SGLang's warm-up request
    without one). Each class holds exactly its raw priorities' requests: 0 is ``default``, 10
    ``high``, and the request sent without a priority ``unset`` on both sides (the scheduler's
    -sys.maxsize - 1, the tokenizer's empty priority); the classes add up to SGLang's own total."""
    scrapes = ("ready", "t001", "t002", "end")
    series, taken = _real_input_series(REAL_SERIES / f"sglang-{version}-priority", scrapes)
    mid = taken[1]
    raw = {}
    for (name, labels), value in mid.items():
        if name in ("sglang:num_running_reqs", "sglang:num_queue_reqs"):
            raw.setdefault(name, {})[dict(labels)["priority"]] = value
    sentinel = "-9223372036854775808"
    assert set(raw["sglang:num_running_reqs"]) == {"", "0", "10", sentinel}
    assert raw["sglang:num_running_reqs"][""] > 0  # mid-run: the case can fail
    cases = []
    for metric in ("num_running_reqs", "num_queue_reqs"):
        by = raw[f"sglang:{metric}"]
        assert by[""] == by["0"] + by["10"] + by[sentinel]  # SGLang's total, priority=""
        cases.append({"expr": f"group_priority_class:sglang_{metric}:sum", "eval_time": "1m", "exp_samples": [
            {"labels": f'group_priority_class:sglang_{metric}:sum{{namespace="llm", priority_class="{cls}", '
                       f'sglang_group="sglang-real", source="sglang_metrics"}}', "value": by[prio]}
            for cls, prio in (("default", "0"), ("high", "10"), ("unset", sentinel))]})
    # first tokens per class over the run: the warm-up request (priority="") is class unset, before the load
    cases.append({"expr": 'count by (priority_class) (group_priority_class:sglang_time_to_first_token_seconds'
                          ':count_rate5m > 0)', "eval_time": "3m",
                  "exp_samples": [{"labels": f'{{priority_class="{cls}"}}', "value": 1} for cls in ("default", "high")]})
    cases.append({"expr": "count by (priority_class) (group_priority_class:sglang_time_to_first_token_seconds"
                          ":count_rate5m)", "eval_time": "3m",
                  "exp_samples": [{"labels": f'{{priority_class="{cls}"}}', "value": 1}
                                  for cls in ("default", "high", "unset")]})
    _promtool_cases(promtool, tmp_path, "real-priority", series, cases)


@pytest.mark.parametrize("version", ["0.5.18", "0.5.23"])
def test_recompute_share_of_a_real_sglang_server_from_either_source(promtool, tmp_path, version):
    """SGLang's own counters give the recompute share the sidecar gives from the log: on a real server
    that retracted (test bed scenario ``kv-pressure``), prefill_compute - effective input tokens is the
    log's #new_tokens_gained (469 tokens on 0.5.23, 474 on 0.5.18), so both sources' shares agree.
    Each counter is written from 0 (less its value at the ready point): rates see its increase only."""
    directory = REAL_SERIES / f"sglang-{version}-kv-pressure"
    ready, end = ({**samples((directory / f"{at}.prom").read_text()),
                   **samples((directory / f"sidecar-{at}.prom").read_text())} for at in ("ready", "end"))
    series = []
    for pod, names in (("sglang-both", ("sglang:", "sglang_scheduler_")), ("sglang-alone", ("sglang:",))):
        for (name, labels), value in end.items():
            if name.startswith(names):
                text = ", ".join(f'{k}="{v}"' for k, v in {**_TARGET, "pod": pod, **dict(labels)}.items())
                series.append({"series": f"{name}{{{text}}}", "values": f"0 {value - ready.get((name, labels), 0):g}"})
    # a counter absent at the ready point was 0 (SGLang creates a child at its first increment)
    grown = {(name, dict(labels).get("mode", dict(labels).get("method"))): value - ready.get((name, labels), 0)
             for (name, labels), value in end.items()}
    recomputed = grown[("sglang_scheduler_recomputed_tokens_total", "new_tokens_gained")]
    assert recomputed > 0 and recomputed == (grown[("sglang:realtime_tokens_total", "prefill_compute")]
                                             - grown[("sglang:prefill_effective_tokens_total", "input")])
    share = recomputed / (grown[("sglang:realtime_tokens_total", "prefill_compute")]
                          + grown[("sglang:realtime_tokens_total", "decode")])
    rule = "group_dp_rank:sglang_scheduler_recomputed_tokens_per_computed_token:ratio_rate5m"
    # to 9 digits: the rules subtract two rates, which rounds in the last bits
    cases = [{"expr": f'round({rule}{{sglang_group="{pod}"}} * 1e9)', "eval_time": "1m", "exp_samples": [
        {"labels": f'{{namespace="llm", sglang_group="{pod}", dp_rank="0", source="{src}"}}',
         "value": round(share * 1e9)} for src in sources]}
        for pod, sources in (("sglang-both", ("log", "sglang_metrics")), ("sglang-alone", ("sglang_metrics",)))]
    _promtool_cases(promtool, tmp_path, "real-recompute", series, cases)


def _promtool_cases(promtool, tmp_path, name: str, series: list[dict], cases: list[dict]) -> None:
    """Run ``cases`` (promql_expr_test entries) over ``series`` with the shipped rules."""
    test = {"rule_files": [str(p) for p in RULE_FILES], "evaluation_interval": "1m",
            "tests": [{"interval": "1m", "input_series": series, "promql_expr_test": cases}]}
    path = tmp_path / f"{name}.test.yml"
    path.write_text(yaml.safe_dump(test, sort_keys=False))
    r = subprocess.run([promtool, "test", "rules", str(path)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]


def test_latency_quantiles_of_a_real_sglang_server(promtool, tmp_path):
    """SGLang 0.5.23's per-request TPOT (and TTFT per priority class) recorded from what a real server
    printed: the per-server TPOT quantiles add every priority and is_streaming value, the class
    ``default`` holds priority 0 only; both equal Prometheus' histogram_quantile of the buckets'
    growth (each counter written from 0 at the ready point, so every rate sees its increase alone)."""
    from histogram_quantile import histogram_quantile

    scrapes = ("ready", "t001", "t002", "end")
    taken = [samples((REAL_SERIES / "sglang-0.5.23-priority" / f"{name}.prom").read_text()) for name in scrapes]
    series = []
    for name, labels in sorted(taken[-1]):
        gauge = name in ("sglang:num_queue_reqs", "sglang:num_running_reqs")  # as printed: they gate the classes
        if not (gauge or name.endswith("_bucket")):
            continue
        text = ", ".join(f'{k}="{v}"' for k, v in (*_TARGET.items(), *labels))
        values = " ".join(f"{scrape.get((name, labels), 0) - (0 if gauge else taken[0].get((name, labels), 0)):g}"
                          for scrape in taken)
        series.append({"series": f"{name}{{{text}}}", "values": values})

    def grown(metric: str, keep) -> dict[float, float]:
        out: dict[float, float] = {}
        for (name, labels), value in taken[-1].items():
            d = dict(labels)
            if name == f"sglang:{metric}_bucket" and keep(d):
                le = float(d["le"])
                out[le] = out.get(le, 0) + value - taken[0].get((name, labels), 0)
        return out

    tpot, ttft0 = grown("request_time_per_output_token_seconds", lambda d: True), \
        grown("time_to_first_token_seconds", lambda d: d["priority"] == "0")
    assert tpot[math.inf] == 40 and ttft0[math.inf] == 20  # the load's 40 requests, 20 at priority 0
    cases = []
    for q in (0.5, 0.99):
        cases.append({"expr": f'round(group:sglang_request_time_per_output_token_seconds:histogram_quantile_rate5m'
                              f'{{quantile="{q:g}"}} * 1e9)', "eval_time": "3m", "exp_samples": [
            {"labels": f'{{namespace="llm", sglang_group="sglang-real", quantile="{q:g}", source="sglang_metrics"}}',
             "value": round(histogram_quantile(q, tpot) * 1e9)}]})
    cases.append({"expr": 'round(group_priority_class:sglang_time_to_first_token_seconds:histogram_quantile_rate5m'
                          '{priority_class="default", quantile="0.99"} * 1e9)', "eval_time": "3m", "exp_samples": [
        {"labels": '{namespace="llm", sglang_group="sglang-real", priority_class="default", quantile="0.99", '
                   'source="sglang_metrics"}', "value": round(histogram_quantile(0.99, ttft0) * 1e9)}]})
    _promtool_cases(promtool, tmp_path, "real-latency", series, cases)


@pytest.mark.parametrize("version", ["0.5.18", "0.5.23"])
def test_dp_imbalance_of_a_real_dp2_server(promtool, tmp_path, version):
    """The DP-rank rules on a real --dp-size 2 server's own /metrics (one scrape a minute): max / mean of
    its two ranks' sglang:num_running_reqs, and the headline takes it (source sglang_metrics) because
    SGLang's per-step token ratio stays at 0 on this server (0.5.23 exports the DP-attention series at 0
    without DP attention; 0.5.18 has none)."""
    scrapes = ("ready", *(f"t{i:03d}" for i in range(1, 10)), "end")
    series, taken = _real_input_series(REAL_SERIES / f"sglang-{version}-dp2", scrapes)
    cases, uneven = [], 0
    for minute, scrape in enumerate(taken):
        running = [v for (name, _), v in sorted(scrape.items()) if name == "sglang:num_running_reqs"]
        assert len(running) == 2
        if not sum(running):
            continue
        ratio = max(running) / (sum(running) / 2)
        uneven += ratio > 1
        for rule in ("group_stage:sglang_scheduler_running_requests:max_over_mean_dp_rank",
                     "group_stage:sglang_scheduler_dp_imbalance:ratio"):
            cases.append({"expr": f'{rule}{{sglang_group="sglang-real"}}', "eval_time": f"{minute}m", "exp_samples": [
                {"labels": f'{rule}{{namespace="llm", sglang_group="sglang-real", source="sglang_metrics"}}',
                 "value": ratio}]})
    assert uneven  # the ranks were uneven at some scrape: the case can fail
    _promtool_cases(promtool, tmp_path, "real-dp2", series, cases)


def test_a_real_starvation_fires_the_alert_scaled_to_the_test_beds_time(promtool, tmp_path):
    """A real episode of SGLang 0.5.23 under --enable-priority-scheduling (the test bed's ``priority``
    scenario on a loaded machine): priority 0 had 16 requests waiting and got no first token for 30 s
    while priority 10 got 16. Scraped every 3 s, so the rules are generated with their windows scaled
    to that time (rate window 6 s, the alert's window 12 s and for 3 s: the same expression, from
    monitoring/): SGLangPriorityStarved fires for class default, never for class high, and not before
    the episode. (promtool evaluates the rule groups of one step in no fixed order, so an alert may
    read the recorded series of the step before: for 3 s holds either way.)"""
    import dataclasses
    import sys

    sys.path.insert(0, str(ROOT))  # monitoring/ builds files and is not installed with the package
    import monitoring
    from monitoring.config import DEFAULT

    alerts = dict(DEFAULT.alerts)
    alerts["SGLangPriorityStarved"] = dataclasses.replace(alerts["SGLangPriorityStarved"], window="12s", for_="3s")
    cfg = dataclasses.replace(DEFAULT, rate_window="6s", alerts=alerts)
    files = []
    for name, text in monitoring.rule_files(cfg).items():
        (tmp_path / name).write_text(text)
        files.append(str(tmp_path / name))
    directory = REAL_SERIES / "sglang-0.5.23-priority-starved"
    scrapes = ("ready", *sorted(p.stem for p in directory.glob("t*.prom")), "end")
    series, taken = _real_input_series(directory, scrapes)

    def first_tokens(scrape, prio: str) -> float:
        return sum(v for (name, labels), v in scrape.items()
                   if name == "sglang:time_to_first_token_seconds_count" and dict(labels)["priority"] == prio)

    def waiting(scrape, prio: str) -> float:
        return sum(v for (name, labels), v in scrape.items()
                   if name == "sglang:num_queue_reqs" and dict(labels)["priority"] == prio)

    # the episode, from the scrapes: the longest run of scrapes where priority 0 waited and got nothing
    stalled = [i for i in range(1, len(taken)) if waiting(taken[i], "0") > 0
               and first_tokens(taken[i], "0") == first_tokens(taken[i - 1], "0")]
    runs: list[list[int]] = []
    for i in stalled:
        if runs and i == runs[-1][-1] + 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    longest = max(runs, key=len)
    start, end = longest[0], longest[-1]
    assert (end - start + 1) * 3 >= 24 and first_tokens(taken[end], "10") - first_tokens(taken[start], "10") >= 8
    firing = 'ALERTS{alertname="SGLangPriorityStarved", alertstate="firing"}'
    labels = 'ALERTS{alertname="SGLangPriorityStarved", alertstate="firing", namespace="llm", priority_class="default", ' \
             'severity="warning", sglang_group="sglang-real", source="sglang_metrics"}'
    cases = [{"expr": firing, "eval_time": f"{(start - 1) * 3}s", "exp_samples": []},
             {"expr": firing, "eval_time": f"{end * 3}s", "exp_samples": [{"labels": labels, "value": 1}]}]
    test = {"rule_files": files, "evaluation_interval": "3s",
            "tests": [{"interval": "3s", "input_series": series, "promql_expr_test": cases}]}
    path = tmp_path / "real-starved.test.yml"
    path.write_text(yaml.safe_dump(test, sort_keys=False))
    r = subprocess.run([promtool, "test", "rules", str(path)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]


def test_the_tp_ranks_copies_count_once_on_a_real_tp2_server(promtool, tmp_path):
    """SGLang 0.5.23 with --tp-size 2 under KV pressure (the test bed's ``tp2`` scenario): both TP ranks
    print the retraction counter and the decode pass counter (identical copies), the prefill passes,
    realtime tokens and effective input only the first (the second holds effective input at 0). The
    rules take one copy: retracted requests per forward pass and the recompute share equal those of
    TP rank 0's own counters. Counters written from 0 at the ready point, as above."""
    directory = REAL_SERIES / "sglang-0.5.23-tp2"
    ready, end = (samples((directory / f"{at}.prom").read_text()) for at in ("ready", "end"))
    grown = {key: value - ready.get(key, 0) for key, value in end.items()}
    series = []
    for (name, labels), value in grown.items():
        if name.endswith("_total"):
            text = ", ".join(f'{k}="{v}"' for k, v in (*_TARGET.items(), *labels))
            series.append({"series": f"{name}{{{text}}}", "values": f"0 {value:g}"})

    def of(name: str, tp: str, **match: str) -> list[float]:
        return [v for (n, labels), v in grown.items() if n == name and dict(labels)["tp_rank"] == tp
                and all(dict(labels).get(k) == want for k, want in match.items())]

    (retracted,), (retracted_tp1,) = of("sglang:num_retracted_requests_total", "0"), \
        of("sglang:num_retracted_requests_total", "1")
    assert retracted == retracted_tp1 > 0  # two copies of one count
    passes = sum(of("sglang:cuda_graph_passes_total", "0"))
    assert of("sglang:cuda_graph_passes_total", "1", mode="decode_none") == \
        of("sglang:cuda_graph_passes_total", "0", mode="decode_none")
    (prefill,), (decode,), (effective,) = (of("sglang:realtime_tokens_total", "0", mode="prefill_compute"),
                                           of("sglang:realtime_tokens_total", "0", mode="decode"),
                                           of("sglang:prefill_effective_tokens_total", "0", mode="input"))
    assert of("sglang:prefill_effective_tokens_total", "1", mode="input") == [0] and prefill > effective
    R = "group_dp_rank:sglang_scheduler_"
    cases = [{"expr": f'round({R}{rule}{{source="sglang_metrics"}} * 1e9)', "eval_time": "1m", "exp_samples": [
        {"labels": '{namespace="llm", sglang_group="sglang-real", dp_rank="0", source="sglang_metrics"}',
         "value": round(value * 1e9)}]}
        for rule, value in (("retracted_requests_per_batch:ratio_rate5m", retracted / passes),
                            ("recomputed_tokens_per_computed_token:ratio_rate5m",
                             (prefill - effective) / (prefill + decode)))]
    _promtool_cases(promtool, tmp_path, "real-tp2", series, cases)

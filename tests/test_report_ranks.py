"""The report's DP ranks and priority classes (exporter/report/ranks.py, classes.py), on real logs.

062 and 063 are real ``--dp-size 2`` logs of the test bed (SGLang 0.5.23 and 0.5.18: ``DP0`` / ``DP1``
prefixes); 008 is one scheduler. The imbalance is checked against a reading of the log's own lines
here (each rank's latest ``#running-req``, held while at most 60 s old, as the sidecar's gauges are),
and through the command's text and JSON.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from datetime import datetime

import pytest
from conftest import CORPUS
from report_support import report_files

from exporter import method

DP2 = ("062-real-0.5.23-dp2-two-schedulers.log", "063-real-0.5.18-dp2-serverargs-repr.log")
ONE = "008-retraction-storm-tokens-gained-uvicorn.log"
_LINE = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) DP(\d+)\] (?:Prefill|Decode) batch\b.*?#running-req: (\d+)")


def _running_ratios(path) -> list[float]:
    """max / mean of the ranks' latest #running-req at every stats line, from the lines themselves."""
    latest: dict[str, tuple[float, int]] = {}
    ratios = []
    for line in path.read_text().splitlines():
        m = _LINE.match(line)
        if not m:
            continue
        t = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S").timestamp()
        latest[m.group(2)] = (t, int(m.group(3)))
        fresh = [n for seen, n in latest.values() if t - seen <= 60]
        if len(fresh) >= 2 and sum(fresh):
            ratios.append(max(fresh) / (sum(fresh) / len(fresh)))
    return ratios


@pytest.mark.parametrize("name", DP2)
def test_two_dp_ranks_side_by_side_and_their_imbalance(name):
    path = CORPUS / name
    doc = report_files(path)
    d = doc["dp_balance"]
    assert d["ranks"] == 2 and set(d["per_rank"]) == {"0", "1"}
    text = path.read_text()
    for dp, r in d["per_rank"].items():
        assert r["lines"] == len(re.findall(rf"DP{dp}\] (?:Prefill|Decode) batch", text))
        assert r["running_mean"] > 0
    ratios = sorted(_running_ratios(path))
    assert len(ratios) > 20  # the case can fail: both ranks ran
    run = d["running_imbalance"]
    assert run["count"] == len(ratios)
    assert run["max"] == pytest.approx(ratios[-1]) and run["mean"] == pytest.approx(sum(ratios) / len(ratios))
    # nearest-rank percentiles of the ratios counted here from the log's own lines
    assert run["p50"] == pytest.approx(ratios[math.ceil(0.5 * len(ratios)) - 1])
    assert run["p90"] == pytest.approx(ratios[math.ceil(0.9 * len(ratios)) - 1])
    assert run["max"] <= 2  # max over mean of two ranks cannot pass 2
    assert d["kv_usage_imbalance"]["count"] > 0
    assert 0 <= d["above_threshold_share"] <= 1 and d["verdict"]["code"] in ("balanced", "imbalanced")
    assert not d["not_available"].get("running_imbalance")


def test_one_rank_is_na_with_the_reason_in_json_and_text():
    doc = report_files(CORPUS / ONE)
    d = doc["dp_balance"]
    assert d["ranks"] == 1 and d["running_imbalance"] is None and d["samples"] is None
    assert "one DP rank" in d["not_available"]["running_imbalance"] and d["verdict"]["code"] == "unknown"
    out = subprocess.run([sys.executable, "-m", "exporter", "report", str(CORPUS / ONE)], capture_output=True,
                         text=True, timeout=120, check=True).stdout
    block = out.split("\nDP ranks\n")[1].split("\n\n")[0]
    assert "n/a (one DP rank in the log: nothing to compare across ranks)" in block


def test_the_text_and_json_give_the_dp_figures_of_a_real_dp2_log():
    path = CORPUS / DP2[0]
    run = [sys.executable, "-m", "exporter", "report", str(path)]
    doc = json.loads(subprocess.run(run + ["--format", "json"], capture_output=True, text=True, timeout=120,
                                    check=True).stdout)
    out = subprocess.run(run, capture_output=True, text=True, timeout=120, check=True).stdout
    d = doc["dp_balance"]
    block = out.split("\nDP ranks\n")[1].split("\n\n")[0]
    assert f"p90 {d['running_imbalance']['p90']:.2f}" in block and "DP0 " in block and "DP1 " in block


def test_the_alert_condition_is_the_methods():
    # SGLangDPRankImbalance: max / mean above 1.5 while the ranks average more than 2 running
    assert method.dp_imbalance_high([13, 3]) and not method.dp_imbalance_high([12, 4])  # 1.625 / exactly 1.5
    assert not method.dp_imbalance_high([3, 0])  # 2.0, but 1.5 per rank
    assert method.dp_imbalance([0, 0]) is None and method.dp_idle_share([3, 0]) == 0.5


@pytest.mark.parametrize("name, state", [(DP2[0], "off"), (DP2[1], "off"), (ONE, "unknown")])
def test_priority_classes_are_na_because_the_log_has_no_priority(name, state):
    c = report_files(CORPUS / name)["priority_classes"]
    assert c["classes"] is None and c["priority_scheduling"] == state
    assert c["not_available"]["classes"].startswith("the scheduler log carries no priority")

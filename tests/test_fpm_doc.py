"""docs/fpm.md says what the code does: its metric table is the collector's, its series budget is
the real output's, and the shipped recording rules prefer the stream and fall back to the log (promtool)."""

from __future__ import annotations

import math
import re
import subprocess
from collections import Counter

import yaml
from conftest import ROOT
from fpm_publisher import ForwardPassMetrics, encode, forward_pass
from histogram_quantile import histogram_quantile
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from exporter.sources.fpm.collector import METRICS, SCHEDULER_LABELS, FpmCollector
from exporter.sources.fpm.decode import decode_frames, schema_of
from exporter.sources.fpm.stats import FpmStats

DOC = ROOT / "docs" / "fpm.md"
ROW = re.compile(r"^\| `(sglang_[a-z0-9_]+)` \| (counter|gauge|histogram) \| ([^|]*) \| (.*) \|$")


def _doc_table() -> dict[str, tuple[str, tuple[str, ...], str]]:
    text = DOC.read_text(encoding="utf-8")
    rows = {}
    for line in text[text.index("<!-- fpm-metrics-table"):].splitlines()[1:]:
        if rows and not line.startswith("|"):
            break
        m = ROW.match(line)
        if m:
            labels = tuple(x.strip().strip("`") for x in m.group(3).split(",") if x.strip())
            rows[m.group(1)] = (m.group(2), labels, m.group(4))
    return rows


def _code_table() -> dict[str, tuple[str, tuple[str, ...], str]]:
    return {name: (kind, (SCHEDULER_LABELS if name.startswith("sglang_scheduler_") else ()) + extra, help_)
            for name, kind, extra, help_ in METRICS}


def _exposition(ranks: int = 2) -> str:
    stats = FpmStats(["ipc:///x.0", "ipc:///x.1"])
    for r in range(ranks):
        payloads = [encode(m) for m in (forward_pass(r, decode=3, prefill=1), forward_pass(r, decode=5),
                                         ForwardPassMetrics(dp_rank=r))]
        msgs = [decode_frames([b"", i.to_bytes(8, "big"), p]) for i, p in enumerate(payloads)]
        stats.apply(r, msgs, schema_of(payloads[0]))
    reg = CollectorRegistry(auto_describe=False)
    reg.register(FpmCollector(stats))
    return generate_latest(reg).decode()


def test_table_is_the_collectors_and_the_output():
    assert _doc_table() == _code_table()
    exposed = {}
    for fam in text_string_to_metric_families(_exposition()):
        exposed[fam.name + ("_total" if fam.type == "counter" else "")] = fam.type
    assert exposed == {name: kind for name, (kind, _, _) in _code_table().items()}


def test_series_budget_is_what_the_doc_says():
    text = " ".join(DOC.read_text(encoding="utf-8").split())
    per_scheduler = int(re.search(r"queue gauges and 1 timestamp: \*\*(\d+)\*\*", text).group(1))
    per_endpoint = int(re.search(r"Per endpoint (\d+) more", text).group(1))
    series = Counter()
    for fam in text_string_to_metric_families(_exposition()):
        for s in fam.samples:
            series[s.labels.get("dp_rank") or s.labels.get("endpoint")] += 1
    assert series["0"] == series["1"] == per_scheduler
    assert series["ipc:///x.0"] == series["ipc:///x.1"] == per_endpoint
    assert f"8 DP ranks adds {8 * (per_scheduler + per_endpoint):,} series" in text


def test_rules_prefer_the_stream_and_fall_back_to_the_log(tmp_path, promtool):
    """The shipped recording rules: a scheduler with the stream gets its exact pass count (idle passes
    excluded) as the retraction share's denominator and its exact batch-size quantiles; one without
    gets the log's."""
    a = 'namespace="ns", job="sglang", instance="a:18400", dp_rank="0"'
    b = 'namespace="ns", job="sglang", instance="b:18400", dp_rank="0"'
    per_min = {  # increase per minute; rate = value / 60
        # Scheduler a: stream and log. Stream: 9 decode + 1 mixed passes/s (idle passes excluded).
        f'sglang_scheduler_forward_passes_total{{{a}, mode="decode"}}': 540,
        f'sglang_scheduler_forward_passes_total{{{a}, mode="mixed"}}': 60,
        f'sglang_scheduler_forward_passes_total{{{a}, mode="idle"}}': 6000,
        f'sglang_scheduler_forward_pass_requests_bucket{{{a}, phase="decode", le="39.0"}}': 0,
        f'sglang_scheduler_forward_pass_requests_bucket{{{a}, phase="decode", le="41.0"}}': 600,
        f'sglang_scheduler_forward_pass_requests_bucket{{{a}, phase="decode", le="+Inf"}}': 600,
        f'sglang_scheduler_batches_total{{{a}, phase="decode"}}': 780,   # the log's estimate: 13/s
        f'sglang_scheduler_batches_total{{{a}, phase="prefill"}}': 60,
        f'sglang_scheduler_batch_size_bucket{{{a}, phase="decode", le="64.0"}}': 60,
        f'sglang_scheduler_batch_size_bucket{{{a}, phase="decode", le="+Inf"}}': 60,
        f'sglang_scheduler_retractions_total{{{a}}}': 30,
        # Scheduler b: the log only.
        f'sglang_scheduler_batches_total{{{b}, phase="decode"}}': 720,
        f'sglang_scheduler_batches_total{{{b}, phase="prefill"}}': 30,
        f'sglang_scheduler_batch_size_bucket{{{b}, phase="decode", le="16.0"}}': 0,
        f'sglang_scheduler_batch_size_bucket{{{b}, phase="decode", le="24.0"}}': 60,
        f'sglang_scheduler_batch_size_bucket{{{b}, phase="decode", le="+Inf"}}': 60,
        f'sglang_scheduler_retractions_total{{{b}}}': 15,
    }
    p90_a = histogram_quantile(0.9, {39.0: 0.0, 41.0: 10.0, math.inf: 10.0})
    p90_b = histogram_quantile(0.9, {16.0: 0.0, 24.0: 1.0, math.inf: 1.0})
    assert (p90_a, p90_b) == (40.8, 23.2)
    # the rules round a batch-size quantile up to whole requests (monitoring.promql.WHOLE_HISTOGRAMS)
    p90_a, p90_b = math.ceil(p90_a), math.ceil(p90_b)
    rules = "group_dp_rank:sglang_scheduler_"
    quantile = f'{rules}decode_batch_size:histogram_quantile_rate5m{{quantile="0.9"}}'
    # (expression, group, source, value); the alerts and the dashboards take fpm before log
    expected = [(f'{rules}batches:rate5m{{source="fpm"}}', "a:18400", "fpm", 10),
                (f"{rules}retractions_per_batch:ratio_rate5m", "a:18400", "log", 0.5 / 10),
                (f"{rules}retractions_per_batch:ratio_rate5m", "b:18400", "log", 0.25 / 12.5),
                (quantile, "a:18400", "fpm", p90_a), (quantile, "a:18400", "log", math.ceil(64.0 * 0.9)),
                (quantile, "b:18400", "log", p90_b)]
    tests = {expr: [] for expr, *_ in expected}
    for expr, inst, source, value in expected:
        extra = ', quantile="0.9"' if "quantile" in expr else ""
        tests[expr].append({"labels": f'{expr.split("{")[0]}{{dp_rank="0", namespace="ns", sglang_group="{inst}"'
                                      f'{extra}, source="{source}"}}', "value": value})
    test = {
        "rule_files": [str(ROOT / "deploy" / "prometheus" / "sglang-recording-rules.yml")],
        "evaluation_interval": "1m",
        "tests": [{
            "interval": "1m",
            "input_series": [{"series": s, "values": f"0+{v}x10"} for s, v in per_min.items()],
            "promql_expr_test": [{"expr": expr, "eval_time": "10m", "exp_samples": samples}
                                 for expr, samples in tests.items()],
        }],
    }
    path = tmp_path / "fpm-rules.test.yml"
    path.write_text(yaml.safe_dump(test, sort_keys=False))
    r = subprocess.run([promtool, "test", "rules", str(path)], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr

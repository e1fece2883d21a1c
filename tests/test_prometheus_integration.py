"""A real Prometheus server scrapes the real running exporter and evaluates our rule files.

The exporter follows a temporary log file; the test appends real corpus lines to it in two steps:

1. the start-up capacity line of the 2026-09-13 server log (corpus 009, same server as 008), which
   creates scheduler ``dp_rank="0"`` with every counter at 0 and the capacity gauges;
2. once Prometheus has stored those zeros, the whole retraction storm of corpus 008.

By hand, from the 008 log: 9 ``KV cache pool is full. Retract requests.`` lines, 2 ``Prefill batch``
lines and 14 ``Decode batch`` lines x 40 decode steps (no ``server_args`` line, so the default
``decode_log_interval`` 40) = 562 batches, so the retraction share is 9 / 562 = 1.601%. Because every
counter's first stored sample is 0 and all samples of one target share their scrape timestamps,
``rate()`` extrapolates numerator and denominator alike and the recording rule must return exactly
that ratio. Likewise the recompute share is 7364 recomputed (``#new_tokens_gained``) / (702 prefill +
36320 decode tokens), and Little's law gives 123 request-seconds / 2 admitted requests = 61.5 s.

Next to the exporter, Prometheus scrapes two local endpoints that serve SGLang's own /metrics
(tests/native_metrics.py: SGLang's names, HELP, label sets and per-TP-rank copies, through
prometheus_client as SGLang serves them), in two steps too (a warm-up, then the storm's step):

* pod ``sglang-0``, the pod of the sidecar (SGLang 0.5.17, --tp 2, one DP rank): 100 retracted
  requests per 1000 decode passes. The rules join it with the sidecar on the pod: the retraction
  share stays the log's 9/562 (one series, source ``log``), while the per-source comparison shows
  SGLang's 0.1; its measured queue wait (every request in (2, 3] s: p90 = 2.9 s) wins over the
  sidecar's Little's law; its TTFT (every request in (0.2, 0.4] s) gives P50 0.3 s and P99 0.398 s.
* pod ``sglang-1``, SGLang's metrics only (0.5.10, --tp 2 --dp 2 with DP attention: dp_rank labels,
  prefill modes): DP rank 0 retracts 100 requests per 2000 decode + 100 prefill passes = 1/21.

Each counter's warm-up value is the same share of its step's increase (1%), so that rate()
extrapolates every series of one target alike and the ratios stay exact.

Only 127.0.0.1 is used; every wait polls with a deadline; every process and server is stopped at the end.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from conftest import CORPUS, ROOT, require_tool, value
from native_metrics import NativeServer, Shape
from prometheus_support import Prometheus as _Prometheus
from prometheus_support import dashboard_targets
from rules_support import RULE_FILES
from prometheus_support import free_port as _free_port
from prometheus_support import get as _get
from prometheus_support import log_lines as _log_lines
from prometheus_support import stop as _stop
from prometheus_support import wait_for as _wait_for

STORM = CORPUS / "008-retraction-storm-tokens-gained-uvicorn.log"
STARTUP = CORPUS / "009-startup-cudagraph-tqdm-warmup-no-rank-tag.log"
@pytest.fixture
def stack(tmp_path):
    """The running exporter on a temp log, and Prometheus scraping it with our rules, on loopback."""
    prometheus_bin = require_tool("prometheus")
    log = tmp_path / "sglang.log"
    log.touch()  # empty; --log.from-beginning so that no line can fall before the start position
    exporter_port, prom_port = _free_port(), _free_port()
    exporter_out = (tmp_path / "exporter.out").open("w")
    exporter = subprocess.Popen(
        [sys.executable, "-m", "exporter", "--log.path", str(log),
         "--web.listen-address", f"127.0.0.1:{exporter_port}",
         "--log.from-beginning", "--log.poll-interval", "0.2", "--gpu.enabled", "false"],
        stdout=exporter_out, stderr=subprocess.STDOUT, cwd=ROOT,
    )
    natives = {"sglang-0": NativeServer(Shape("0.5.17", tp_size=2)),
               "sglang-1": NativeServer(Shape("0.5.10", tp_size=2, dp_size=2))}
    native_ports = {pod: _free_port() for pod in natives}
    for pod, server in natives.items():
        server.start(native_ports[pod])
    config = tmp_path / "prometheus.yml"
    config.write_text(json.dumps({  # JSON is YAML
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(p) for p in RULE_FILES],
        # outside Kubernetes, a pod label in the scrape config pairs the sidecar with its SGLang server
        "scrape_configs": [{
            "job_name": "sglang-exporter",
            "static_configs": [{"targets": [f"127.0.0.1:{exporter_port}"], "labels": {"pod": "sglang-0"}}],
        }, {
            "job_name": "sglang",
            "static_configs": [{"targets": [f"127.0.0.1:{native_ports[pod]}"], "labels": {"pod": pod}}
                               for pod in natives],
        }],
    }))
    prom_out = (tmp_path / "prometheus.out").open("w")
    prometheus = subprocess.Popen(
        [prometheus_bin, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
         f"--web.listen-address=127.0.0.1:{prom_port}", "--log.level=warn"],
        stdout=prom_out, stderr=subprocess.STDOUT, cwd=tmp_path,
    )
    procs = (exporter, prometheus)
    try:
        yield {
            "log": log,
            "metrics_url": f"http://127.0.0.1:{exporter_port}/metrics",
            "prom": _Prometheus(f"http://127.0.0.1:{prom_port}"),
            "procs": procs,
            "natives": natives,
        }
    finally:
        for p in procs:
            _stop(p)
        for server in natives.values():
            server.stop()
        exporter_out.close()
        prom_out.close()


def _native_step(natives: dict[str, NativeServer], scale: float) -> None:
    """Set SGLang's counters: ``scale`` 0.01 is the warm-up, 1.01 the warm-up plus the storm's step."""
    same, only = natives["sglang-0"], natives["sglang-1"]
    with same.lock:
        st = same.schedulers[0]
        st.decode_passes, st.retracted_requests = 1000 * scale, 100 * scale
        st.running, st.queue, st.token_usage, st.max_total_num_tokens = 40, 29, 0.91, 87552
        st.queue_times = [2.5] * round(100 * scale)
        same.tokenizer.ttft = [(0.3, True)] * round(100 * scale)
        same.tokenizer.itl = [0.03] * round(1000 * scale)
        same.tokenizer.e2e = [(5.0, True)] * round(100 * scale)
    with only.lock:
        dp0, dp1 = only.schedulers[0], only.schedulers[1]
        dp0.decode_passes, dp0.prefill_passes, dp0.retracted_requests = 2000 * scale, 100 * scale, 100 * scale
        dp1.decode_passes = 2000 * scale
        for st in (dp0, dp1):
            st.queue, st.token_usage = 3, 0.5


def test_prometheus_scrapes_exporter_and_rules_compute_the_retraction_share(stack):
    prom, procs, log, natives = stack["prom"], stack["procs"], stack["log"], stack["natives"]
    exported = lambda: _get(stack["metrics_url"])  # noqa: E731

    _wait_for("the exporter to serve /metrics", lambda: "sglang_exporter_build_info" in exported(), procs=procs)

    # Step 1: the capacity line creates the scheduler with all counters at 0; SGLang's servers warm up.
    _native_step(natives, 0.01)
    capacity = [line for line in _log_lines(STARTUP) if "max_total_num_tokens=" in line]
    assert len(capacity) == 1
    with log.open("a") as f:
        f.writelines(capacity)
    _wait_for("the exporter to read the capacity line",
              lambda: value(exported(), "sglang_scheduler_max_total_tokens", stage="", dp_rank="0") == 87552,
              procs=procs)
    _wait_for("Prometheus to store the zero counters of a healthy target and SGLang's warm-up",
              lambda: prom.scalar('up{job="sglang-exporter"}') == 1
              and prom.scalar('sum(sglang_scheduler_batches_total{stage="", dp_rank="0"})') == 0
              and prom.scalar('sglang_scheduler_retractions_total{stage="", dp_rank="0"}') == 0
              and len(prom.query('{__name__=~"sglang[:_]num_retracted_requests_total"}')) == 3,  # 2 TP copies + DP 0
              procs=procs)

    # Step 2: the retraction storm, appended the way SGLang writes it; SGLang's counters move on.
    storm = _log_lines(STORM)
    _native_step(natives, 1.01)
    with log.open("a") as f:
        f.writelines(storm)
    _wait_for("the exporter to read the storm",
              lambda: value(exported(), "sglang_scheduler_retractions_total", stage="", dp_rank="0") == 9,
              procs=procs)

    expected = 9 / (2 + 14 * 40)
    ratio_rule = "group_dp_rank:sglang_scheduler_retractions_per_batch:ratio_rate5m"
    native_only = 100 / 2100

    def headline() -> dict[tuple[str, str], tuple[str, float]]:
        return {(r["metric"]["sglang_group"], r["metric"]["dp_rank"]): (r["metric"]["source"], float(r["value"][1]))
                for r in prom.query(ratio_rule)}

    got = _wait_for(
        f"{ratio_rule} == 9/562 (sidecar pod) and 1/21 (SGLang's metrics only)",
        lambda: (h := headline()).keys() == {("sglang-0", "0"), ("sglang-1", "0")}
        and math.isclose(h["sglang-0", "0"][1], expected, rel_tol=1e-9)
        and math.isclose(h["sglang-1", "0"][1], native_only, rel_tol=1e-9) and h,
        procs=procs,
    )
    # One series per scheduler: the sidecar's pod is joined with SGLang's series of the same pod (its
    # sglang_group is the pod, not an instance) and takes the log's events; SGLang alone gives requests.
    assert got == {("sglang-0", "0"): ("log", got["sglang-0", "0"][1]),
                   ("sglang-1", "0"): ("sglang_metrics", got["sglang-1", "0"][1])}
    (labels,) = [r["metric"] for r in prom.query(f'{ratio_rule}{{sglang_group="sglang-0"}}')]
    assert labels == {"__name__": ratio_rule, "sglang_group": "sglang-0", "dp_rank": "0", "source": "log"}

    # The raw series the rules read exist, with the figures of the log.
    raw = {
        'sum(sglang_scheduler_batches_total{stage="", dp_rank="0"})': 562,
        'sglang_scheduler_retractions_total{stage="", dp_rank="0"}': 9,
        'sum(sglang_scheduler_recomputed_tokens_total{stage="", dp_rank="0"})': 7364,
        'sglang_scheduler_queue_request_seconds_total{stage="", dp_rank="0"}': 123,
        'sglang_scheduler_admitted_requests_total{stage="", dp_rank="0"}': 2,
        'sglang_scheduler_max_running_requests{stage="", dp_rank="0"}': 2048,
    }
    for expr, want in raw.items():
        assert prom.scalar(expr) == want, expr

    # The other ratios the dashboards share, each exact for the same reason.
    exact = {
        'group_dp_rank:sglang_scheduler_recomputed_tokens_per_computed_token:ratio_rate5m': 7364 / (702 + 36320),
        'group_dp_rank:sglang_scheduler_queue_wait_seconds:mean_rate5m{source="log"}': 123 / 2,
        'group_dp_rank:sglang_scheduler_prefill_cache_hit:ratio_rate5m': 72 / (72 + 702),
        # SGLang's own figures of the sidecar's pod, beside the log's
        'group_dp_rank:sglang_scheduler_retracted_requests_per_batch:ratio_rate5m{source="sglang_metrics", sglang_group="sglang-0"}': 0.1,
        'group_dp_rank:sglang_scheduler_queue_wait_seconds:histogram_quantile_rate5m{quantile="0.9", sglang_group="sglang-0"}': 2.9,
        'group:sglang_time_to_first_token_seconds:histogram_quantile_rate5m{quantile="0.5", sglang_group="sglang-0"}': 0.3,
        'group:sglang_time_to_first_token_seconds:histogram_quantile_rate5m{quantile="0.99", sglang_group="sglang-0"}': 0.398,
    }
    for rule, want in exact.items():  # each rule group evaluates on its own schedule: wait for the step
        _wait_for(f"{rule} == {want}", lambda: (v := prom.scalar(rule)) is not None and math.isclose(v, want, rel_tol=1e-9),
                  procs=procs)
    assert prom.scalar('group_dp_rank:sglang_scheduler_max_total_tokens:max{source="log"}') == 87552
    assert prom.scalar('group_dp_rank:sglang_scheduler_queue_requests:max{source="log"}') == 29
    sources = {r["metric"]["source"] for r in prom.query('group_dp_rank:sglang_scheduler_batches:rate5m{sglang_group="sglang-0"}')}
    assert sources == {"log", "sglang_metrics"}
    dp_ranks = {r["metric"]["dp_rank"] for r in prom.query('group_dp_rank:sglang_scheduler_batches:rate5m{sglang_group="sglang-1"}')}
    assert dp_ranks == {"0", "1"}

    # Every dashboard query runs on the real server (variables filled in as Grafana would with "All");
    # the headline panels return the figures of the log and of SGLang's metrics.
    dashboards = {p.name: json.loads(p.read_text()) for p in (ROOT / "grafana").glob("*.json")}
    results = {(name, title, ref): prom.query(expr)  # raises on a query error
               for name, board in dashboards.items() for title, ref, expr in dashboard_targets(board)}

    def per_scheduler(title: str, ref: str = "A", board: str = "sglang-scheduler.json") -> dict[tuple[str, str], float]:
        return {(r["metric"].get("sglang_group"), r["metric"].get("dp_rank")): float(r["value"][1])
                for r in results[(board, title, ref)]}

    ratio_panel = per_scheduler("Retraction ratio vs the 5% line")
    assert ratio_panel.keys() == {("sglang-0", "0"), ("sglang-1", "0")}
    assert math.isclose(ratio_panel["sglang-0", "0"], expected, rel_tol=1e-9)

    # The on-call row of stat panels shows, per scheduler, what the alerts read: the retraction share of
    # the log for the sidecar's pod and SGLang's for the other, KV occupancy from the log where the
    # sidecar reads it, and the queue wait SGLang measured. The decode batch p50 / ceiling returns one
    # series, the sidecar's; its value is not checked here because the exporter exposes the finite
    # batch-size buckets only from the scheduler's first batch line on, so their first stored sample
    # already holds the storm (tests/test_dashboards.py checks that figure on known series with promtool).
    share = per_scheduler("Retraction share (5% rule)")
    assert math.isclose(share["sglang-0", "0"], expected, rel_tol=1e-9)
    assert math.isclose(share["sglang-1", "0"], native_only, rel_tol=1e-9)
    kv = per_scheduler("KV cache occupancy")
    assert math.isclose(kv["sglang-0", "0"], value(exported(), "sglang_scheduler_kv_usage_ratio", stage="", dp_rank="0"),
                        rel_tol=1e-9)
    assert kv["sglang-1", "0"] == kv["sglang-1", "1"] == 0.5
    assert math.isclose(per_scheduler("Queue wait (as alerted)")["sglang-0", "0"], 2.9, rel_tol=1e-9)
    assert per_scheduler("Decode batch p50 / ceiling").keys() == {("sglang-0", "0")}
    # The on-call dashboard answers its four questions with data: retractions against the 5% line, the
    # batch against KV and the ceiling, the queue, and which DP rank (sglang-1 has two).
    oncall = "sglang-oncall.json"
    share = per_scheduler("Retractions / batches (5% rule)", board=oncall)
    assert math.isclose(share["sglang-0", "0"], expected, rel_tol=1e-9)
    assert math.isclose(share["sglang-1", "0"], native_only, rel_tol=1e-9)
    assert per_scheduler("Decode batch p50 / ceiling", board=oncall).keys() == {("sglang-0", "0")}
    bounded = per_scheduler("Bounded by KV or by the ceiling", "B", board=oncall)
    assert bounded["sglang-1", "0"] == bounded["sglang-1", "1"] == 0.5
    assert per_scheduler("Waiting requests and their slope", board=oncall)["sglang-0", "0"] == 29
    assert math.isclose(per_scheduler("Queue wait (as alerted)", board=oncall)["sglang-0", "0"], 2.9, rel_tol=1e-9)
    assert per_scheduler("Which DP rank: running requests per rank", board=oncall).keys() >= {
        ("sglang-1", "0"), ("sglang-1", "1")}
    by_source = {(r["metric"]["sglang_group"], r["metric"]["source"])
                 for r in results[("sglang-scheduler.json", "Retracted requests per batch, by source", "A")]}
    assert by_source == {("sglang-0", "log"), ("sglang-0", "sglang_metrics"), ("sglang-1", "sglang_metrics")}
    sources_table = {(r["metric"]["sglang_group"], r["metric"]["dp_rank"], r["metric"]["source"])
                     for r in results[("sglang-scheduler.json", "Sources per scheduler", "A")]}
    assert sources_table == {("sglang-0", "0", "log"), ("sglang-0", "0", "sglang_metrics"),
                             ("sglang-1", "0", "sglang_metrics"), ("sglang-1", "1", "sglang_metrics")}
    for key in [("sglang-scheduler.json", "Decode batch size percentiles vs the configured ceiling", "A"),
                ("sglang-scheduler.json", "Queue wait", "A"),
                ("sglang-scheduler.json", "Time to first token", "B"),
                ("sglang-scheduler.json", "Inter-token latency and time per output token", "E"),  # the step estimate
                ("sglang-scheduler.json", "End-to-end request latency", "B"),
                ("sglang-capacity.json", "KV capacity in requests vs ceiling and actual batch", "B"),
                ("sglang-capacity.json", "Safe capacity (as alerted)", "A")]:
        assert results[key], key

    # Every rule of every group loaded and evaluates without error; no alert fires twice for one
    # scheduler (the storm is too short to fire any).
    rules = json.loads(_get(f"{prom.base}/api/v1/rules"))["data"]["groups"]
    loaded = [r for g in rules for r in g["rules"]]
    assert len(loaded) == sum(p.read_text().count("- record:") + p.read_text().count("- alert:") for p in RULE_FILES)
    broken = [(r["name"], r["health"], r.get("lastError")) for r in loaded if r["health"] != "ok"]
    assert not broken

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

Only 127.0.0.1 is used; every wait polls with a deadline and both processes are stopped at the end.
"""

from __future__ import annotations

import json
import math
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from conftest import CORPUS, ROOT, require_tool, value

RULE_FILES = sorted((ROOT / "deploy" / "prometheus").glob("sglang-*.yml"))
STORM = CORPUS / "008-retraction-storm-tokens-gained-uvicorn.log"
STARTUP = CORPUS / "009-startup-cudagraph-tqdm-warmup-no-rank-tag.log"
DEADLINE_S = 60.0


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _log_lines(path: Path) -> list[str]:
    """The log lines of a corpus file (its three '# ' header lines are not log output)."""
    return [line for line in path.read_text().splitlines(keepends=True) if not line.startswith("# ")]


def _get(url: str, timeout: float = 5.0) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - loopback only
        return response.read().decode()


def _wait_for(what: str, probe, deadline_s: float = DEADLINE_S, procs=()):
    """Poll ``probe()`` until it returns something truthy; fail with the last value at the deadline."""
    end = time.monotonic() + deadline_s
    last = None
    while time.monotonic() < end:
        for p in procs:
            if p.poll() is not None:
                pytest.fail(f"{what}: {p.args[0]} exited with {p.returncode}")
        try:
            last = probe()
        except (OSError, urllib.error.URLError, ValueError, KeyError) as exc:
            last = exc
        else:
            if last:
                return last
        time.sleep(0.2)
    pytest.fail(f"timed out after {deadline_s:.0f}s waiting for {what}; last: {last!r}")


class _Prometheus:
    def __init__(self, base: str):
        self.base = base

    def query(self, expr: str) -> list[dict]:
        url = f"{self.base}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        body = json.loads(_get(url))
        assert body["status"] == "success", body
        return body["data"]["result"]

    def scalar(self, expr: str) -> float | None:
        result = self.query(expr)
        if len(result) != 1:
            return None
        return float(result[0]["value"][1])


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


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
    config = tmp_path / "prometheus.yml"
    config.write_text(json.dumps({  # JSON is YAML
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(p) for p in RULE_FILES],
        "scrape_configs": [{
            "job_name": "sglang-exporter",
            "static_configs": [{"targets": [f"127.0.0.1:{exporter_port}"]}],
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
        }
    finally:
        for p in procs:
            _stop(p)
        exporter_out.close()
        prom_out.close()


def test_prometheus_scrapes_exporter_and_rules_compute_the_retraction_share(stack):
    prom, procs, log = stack["prom"], stack["procs"], stack["log"]
    exported = lambda: _get(stack["metrics_url"])  # noqa: E731

    _wait_for("the exporter to serve /metrics", lambda: "sglang_exporter_build_info" in exported(), procs=procs)

    # Step 1: the capacity line creates the scheduler with all counters at 0.
    capacity = [line for line in _log_lines(STARTUP) if "max_total_num_tokens=" in line]
    assert len(capacity) == 1
    with log.open("a") as f:
        f.writelines(capacity)
    _wait_for("the exporter to read the capacity line",
              lambda: value(exported(), "sglang_scheduler_max_total_tokens", dp_rank="0") == 87552,
              procs=procs)
    _wait_for("Prometheus to store the zero counters of a healthy target",
              lambda: prom.scalar('up{job="sglang-exporter"}') == 1
              and prom.scalar('sum(sglang_scheduler_batches_total{dp_rank="0"})') == 0
              and prom.scalar('sglang_scheduler_retractions_total{dp_rank="0"}') == 0,
              procs=procs)

    # Step 2: the retraction storm, appended the way SGLang writes it.
    storm = _log_lines(STORM)
    with log.open("a") as f:
        f.writelines(storm)
    _wait_for("the exporter to read the storm",
              lambda: value(exported(), "sglang_scheduler_retractions_total", dp_rank="0") == 9,
              procs=procs)

    expected = 9 / (2 + 14 * 40)
    ratio_rule = "group_dp_rank:sglang_scheduler_retractions_per_batch:ratio_rate5m"
    got = _wait_for(
        f"{ratio_rule} == 9/562",
        lambda: (v := prom.scalar(ratio_rule)) is not None and math.isclose(v, expected, rel_tol=1e-9) and v,
        procs=procs,
    )
    assert math.isclose(got, expected, rel_tol=1e-9)
    result = prom.query(ratio_rule)
    labels = result[0]["metric"]
    # No sglang_group label in the scrape config: the rules default it to the target's instance.
    assert labels["sglang_group"] == prom.query('up{job="sglang-exporter"}')[0]["metric"]["instance"]
    assert labels["source"] == "log" and labels["dp_rank"] == "0" and "job" not in labels

    # The raw series the rules read exist, with the figures of the log.
    raw = {
        'sum(sglang_scheduler_batches_total{dp_rank="0"})': 562,
        'sglang_scheduler_retractions_total{dp_rank="0"}': 9,
        'sum(sglang_scheduler_recomputed_tokens_total{dp_rank="0"})': 7364,
        'sglang_scheduler_queue_request_seconds_total{dp_rank="0"}': 123,
        'sglang_scheduler_admitted_requests_total{dp_rank="0"}': 2,
        'sglang_scheduler_max_running_requests{dp_rank="0"}': 2048,
    }
    for expr, want in raw.items():
        assert prom.scalar(expr) == want, expr

    # The other ratios the dashboards share, each exact for the same reason.
    exact = {
        "group_dp_rank:sglang_scheduler_recomputed_tokens_per_computed_token:ratio_rate5m": 7364 / (702 + 36320),
        "group_dp_rank:sglang_scheduler_queue_wait_seconds:mean_rate5m": 123 / 2,
        "group_dp_rank:sglang_scheduler_prefill_cache_hit:ratio_rate5m": 72 / (72 + 702),
    }
    for rule, want in exact.items():
        v = prom.scalar(rule)
        assert v is not None and math.isclose(v, want, rel_tol=1e-9), (rule, v, want)
    assert prom.scalar("group_dp_rank:sglang_scheduler_max_total_tokens:max") == 87552
    assert prom.scalar("group_dp_rank:sglang_scheduler_queue_requests:max") == 29

    # Every dashboard query runs on the real server (variables filled in as Grafana would with "All");
    # the headline panels return the figures of the log.
    dashboards = {p.name: json.loads(p.read_text()) for p in (ROOT / "grafana").glob("*.json")}
    results = {}
    for name, board in dashboards.items():
        for panel in board["panels"]:
            for t in panel.get("targets", []):
                expr = t["expr"]
                for var, val in (("$__rate_interval", "5m"), ("$safety_factor", "0.7"), ("$namespace", ".*"),
                                 ("$pod", ".*"), ("$dp_rank", ".*"), ("$gpu", ".*")):
                    expr = expr.replace(var, val)
                results[(name, panel["title"], t["refId"])] = prom.query(expr)  # raises on a query error
    ratio_panel = results[("sglang-scheduler.json", "Retraction ratio vs the 5% line", "A")]
    assert len(ratio_panel) == 1 and math.isclose(float(ratio_panel[0]["value"][1]), expected, rel_tol=1e-9)

    # The on-call row of stat panels shows the figures of the log: the retraction share and Little's
    # law exactly, KV occupancy as exported. The decode batch p50 / ceiling returns one series per
    # scheduler; its value is not checked here because the exporter exposes the finite batch-size
    # buckets only from the scheduler's first batch line on, so their first stored sample already
    # holds the storm (tests/test_dashboards.py checks that figure on known series with promtool).
    def stat(title: str) -> float:
        (series,) = results[("sglang-scheduler.json", title, "A")]
        assert series["metric"].get("dp_rank") == "0", (title, series)
        return float(series["value"][1])

    assert math.isclose(stat("Retraction share (5% rule)"), expected, rel_tol=1e-9)
    assert math.isclose(stat("Mean queue wait"), 123 / 2, rel_tol=1e-9)
    assert math.isclose(stat("KV cache occupancy"),
                        value(exported(), "sglang_scheduler_kv_usage_ratio", dp_rank="0"), rel_tol=1e-9)
    stat("Decode batch p50 / ceiling")
    for key in [("sglang-scheduler.json", "Decode batch size percentiles vs the configured ceiling", "A"),
                ("sglang-scheduler.json", "Queue wait", "A"),
                ("sglang-capacity.json", "KV capacity in requests vs ceiling and actual batch", "B"),
                ("sglang-capacity.json", "Safe capacity (as alerted)", "A")]:
        assert results[key], key

    # Every rule of every group loaded and evaluates without error.
    rules = json.loads(_get(f"{prom.base}/api/v1/rules"))["data"]["groups"]
    loaded = [r for g in rules for r in g["rules"]]
    assert len(loaded) == sum(p.read_text().count("- record:") + p.read_text().count("- alert:") for p in RULE_FILES)
    broken = [(r["name"], r["health"], r.get("lastError")) for r in loaded if r["health"] != "ok"]
    assert not broken

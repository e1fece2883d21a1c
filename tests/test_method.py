"""The method's formulas (exporter/method.py), and one truth: the live view and the report agree.

The "Done when" test of issue 24: every real log of tests/corpus/ goes through the sidecar
(``sglang-exporter --one-shot``: the same source, ingest and store as the live sidecar) into a real
Prometheus server that evaluates the shipped rules, and every figure that both the recording rules
and ``sglang-exporter report --format json`` give is compared, within the tolerance stated per
figure in :data:`FIGURES`.

How the replay works: a loopback HTTP server serves each log's exposition as one scrape target (its
own ``sglang_group``), first with every counter and histogram at 0 (the gauges as they end), then
as the log ends. All samples of one target share their scrape timestamps and every counter's first
stored sample is 0, so ``rate()`` extrapolates every series of a target alike and the rules' ratios
are the log's own ratios, exactly (as in tests/test_prometheus_integration.py). One Prometheus
serves all logs at once; every wait polls with a deadline.
"""

from __future__ import annotations

import io
import json
import math
import re
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from contextlib import redirect_stdout
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from conftest import ROOT, corpus_files, require_tool
from exporter_support import one_shot_run

from exporter import method
from exporter.cli import main

RULE_FILES = sorted((ROOT / "deploy" / "prometheus").glob("sglang-*.yml"))
DEADLINE_S = 90.0
R = "group_dp_rank:sglang_scheduler_"


# -- the formulas ------------------------------------------------------------------------------------

def test_overstatement_is_share_over_useful_share():
    # 18% recompute: computed = useful / 0.82, so tokens/s overstate useful work by 22%, not 18%
    assert method.overstatement(0.18) == pytest.approx(0.18 / 0.82)
    assert round(method.overstatement(0.199), 3) == 0.248  # the report's 19.9% -> 24.8%
    assert method.overstatement(1.0) is None


def test_shares_and_capacities_are_none_outside_their_domain():
    assert method.retraction_share(9, 562) == pytest.approx(9 / 562)
    assert method.retraction_share(3, 2) is None and method.retraction_share(0, 0) is None
    assert method.useful_tokens(100, 120) is None and method.useful_tokens(100, 20) == 80
    assert method.safe_capacity(68.4) == 47 and method.safe_capacity(None) is None
    assert method.capacity_requests(87552, None) is None
    assert method.kv_tokens_per_request(90000, 50) == 1800 and method.kv_tokens_per_request(5, 0) is None


def test_bounds_the_log_gives():
    assert method.decode_step(13, None, 0.5) == 26.0
    assert method.decode_step_bound(2.0, 40) == pytest.approx(3 / 40)  # 1-s stamps: one second more
    assert method.decode_step_bound(None, 40) is None
    assert not method.wait_within_log(1071.0, 23.0) and method.wait_within_log(9.46, 23.0)
    assert method.queue_steady(51, 2, 1) and not method.queue_steady(0, 29, 2)


def test_bound_by_kv_is_one_definition_for_the_report_and_the_alert():
    assert method.bound_by_kv(40, 128, 0.95)          # median 31% of the ceiling, KV 95% full
    assert not method.bound_by_kv(100, 128, 0.95)     # the batch is near the ceiling
    assert not method.bound_by_kv(40, 128, 0.80)      # KV has room
    from monitoring.config import DEFAULT
    a = DEFAULT.alerts["SGLangBatchBoundByKV"]
    assert (a.threshold, a.guard) == (method.BOUND_BY_KV_BATCH_SHARE, method.BOUND_BY_KV_USAGE)
    assert DEFAULT.alerts["SGLangRetractionRatioHigh"].threshold == method.RETRACTION_RULE
    assert DEFAULT.alerts["SGLangRecomputeShareHigh"].threshold == method.RECOMPUTE_SHARE_HIGH
    assert DEFAULT.safety_factor == method.SAFETY_FACTOR


# -- one truth: the rules and the report on every corpus log -------------------------------------------

def _exact(report: float, rule: float) -> bool:
    return math.isclose(report, rule, rel_tol=1e-9, abs_tol=1e-12)


def _bucketed(report: float, rule: float) -> bool:
    # the batch-size buckets hold every percentile within max(1, 5%) (exporter/metrics/buckets.py);
    # the rule's quantile is rounded up to whole requests, the report's is nearest-rank
    return abs(rule - report) <= max(1.0, 0.05 * report)


def _kv_from_pool(doc: dict) -> bool:
    k = doc["kv_capacity"]
    return k["capacity_source"] == "start-up line" and k["capacity_limiting_pool"] == "kv"


def _no_prealloc(doc: dict) -> bool:
    # a PD decode server's Decode lines count KV pre-allocated for requests in transfer: the report
    # leaves it out (pre-allocated usage x capacity), the counters cannot (the line gives no split)
    return doc["kv_capacity"]["preallocated_tokens_excluded"] is None


def _same_admissions(doc: dict, samples: str) -> bool:
    # the report counts admissions with a chunked-prefill size it may infer from the log; the
    # sidecar counts with the size the log states (else none): compare where both count alike
    m = re.search(r'^sglang_scheduler_admitted_requests_total\{[^}]*\} (\S+)$', samples, re.M)
    return m is not None and float(m.group(1)) == doc["queue_latency"]["admitted_requests"]


#: (report figure, recording rule, extra matcher, compare, applies): every figure both give.
FIGURES = (
    ("retractions.share_of_batches", "retractions_per_batch:ratio_rate5m", "", _exact, None),
    ("throughput.recompute_share", "recomputed_tokens_per_computed_token:ratio_rate5m", "", _exact, None),
    ("throughput.cache_hit_ratio", "prefill_cache_hit:ratio_rate5m", "", _exact, None),
    ("kv_capacity.mean_tokens_per_running_request", "kv_tokens_per_request:mean5m", "", _exact, _no_prealloc),
    ("kv_capacity.capacity_tokens", "max_total_tokens:max", "", _exact, _kv_from_pool),
    ("kv_capacity.capacity_requests", "kv_capacity_requests:estimate5m", "", _exact,
     lambda d: _kv_from_pool(d) and _no_prealloc(d)),
    ("kv_capacity.safe_ceiling_requests", "kv_capacity_requests:safe5m", "", _exact,
     lambda d: _kv_from_pool(d) and _no_prealloc(d)),
    ("batch_size.max_running_requests", "max_running_requests:max", "", _exact,
     lambda d: d["batch_size"]["max_running_requests_source"] == "capacity line"),
    ("batch_size.decode.mean", "decode_batch_size:mean_rate5m", "", _exact, None),
    ("batch_size.prefill.mean", "prefill_batch_size:mean_rate5m", "", _exact, None),
    *((f"batch_size.{phase}.p{q}", f"{phase}_batch_size:histogram_quantile_rate5m", f'quantile="{q / 100:g}"',
       _bucketed, None) for phase in ("decode", "prefill") for q in (50, 90, 99)),
    ("queue_latency.mean_wait_seconds_littles_law", "queue_wait_seconds:mean_rate5m", "", _exact, "admissions"),
)


def _dig(doc: dict, dotted: str):
    for part in dotted.split("."):
        doc = doc.get(part) if isinstance(doc, dict) else None
    return doc


def _report(path) -> dict:
    out = io.StringIO()
    with redirect_stdout(out):
        main(["report", "--format", "json", str(path)])
    return json.loads(out.getvalue())


_COUNTED = re.compile(r"^# TYPE (\S+) (counter|histogram)$", re.M)


def _zeroed(text: str) -> str:
    """The exposition with every counter and histogram sample at 0 (a scheduler before its first line)."""
    families = tuple(_COUNTED.findall(text))
    names = tuple(name for name, _ in families)
    out = []
    for line in text.splitlines():
        if line and not line.startswith("#"):
            metric = line.split("{", 1)[0].split(" ", 1)[0]
            if metric in names or re.sub(r"_(bucket|sum|count)$", "", metric) in names:
                line = line.rsplit(" ", 1)[0] + " 0.0"
        out.append(line)
    return "\n".join(out) + "\n"


class _Targets(ThreadingHTTPServer):
    """Serves each log's exposition under ``/<index>``: zeroed until :attr:`final` is set."""

    def __init__(self, expositions: list[str]):
        self.final = False
        self.pages = [(_zeroed(t).encode(), t.encode()) for t in expositions]
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's name
                zero, last = server.pages[int(self.path.strip("/"))]
                body = last if server.final else zero
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        super().__init__(("127.0.0.1", 0), Handler)


def _query(base: str, expr: str) -> list[dict]:
    url = f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=5) as r:  # noqa: S310 - loopback only
        body = json.loads(r.read())
    assert body["status"] == "success", body
    return body["data"]["result"]


def _rule_groups(base: str) -> list[dict]:
    with urllib.request.urlopen(f"{base}/api/v1/rules?type=record", timeout=5) as r:  # noqa: S310 - loopback
        return json.loads(r.read())["data"]["groups"]


def _evaluated_after(stamp: str, t: float) -> bool:
    """Whether an RFC 3339 ``lastEvaluation`` (nanoseconds, ``Z``) is later than ``t`` (epoch seconds)."""
    day, _, frac = stamp.rstrip("Z").partition(".")
    return time.mktime(time.strptime(day, "%Y-%m-%dT%H:%M:%S")) - time.timezone + float("0." + (frac or "0")) > t


def _wait(what: str, probe, proc):
    end = time.monotonic() + DEADLINE_S
    last = None
    while time.monotonic() < end:
        if proc.poll() is not None:
            pytest.fail(f"{what}: prometheus exited with {proc.returncode}")
        try:
            last = probe()
        except OSError as exc:
            last = exc
        else:
            if last:
                return last
        time.sleep(0.2)
    pytest.fail(f"timed out waiting for {what}; last: {last!r}")


def test_rules_and_report_agree_on_every_corpus_log(tmp_path):
    prometheus_bin = require_tool("prometheus")
    logs = corpus_files()
    expositions, reports = [], []
    for path in logs:
        code, text = one_shot_run(path)
        assert code in (0, 3), path  # 3: no scheduler line (the figures are then all n/a)
        expositions.append(text)
        reports.append(_report(path))
    single = [i for i, d in enumerate(reports) if len(d["schedulers"]) == 1 and not d["stages"]]
    targets = _Targets(expositions)
    threading.Thread(target=targets.serve_forever, daemon=True).start()
    port = targets.server_address[1]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        prom_port = s.getsockname()[1]
    config = tmp_path / "prometheus.yml"
    config.write_text(json.dumps({
        "global": {"scrape_interval": "2s", "scrape_timeout": "2s", "evaluation_interval": "1s"},
        "rule_files": [str(p) for p in RULE_FILES],
        "scrape_configs": [{"job_name": f"log{i}", "metrics_path": f"/{i}",
                            "static_configs": [{"targets": [f"127.0.0.1:{port}"], "labels": {"sglang_group": f"log{i}"}}]}
                           for i in range(len(logs))],
    }))
    out = (tmp_path / "prometheus.out").open("w")
    proc = subprocess.Popen([prometheus_bin, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                             f"--web.listen-address=127.0.0.1:{prom_port}", "--log.level=warn"],
                            stdout=out, stderr=subprocess.STDOUT, cwd=tmp_path)
    base = f"http://127.0.0.1:{prom_port}"
    try:
        n = len(logs)
        _wait("every target's zeroed scrape", lambda: len(_query(base, "up == 1")) == n, proc)
        _wait("the zeroed counters stored",
              lambda: len(_query(base, 'count by (sglang_group) (sglang_exporter_log_lines_total)')) == n, proc)
        targets.final = True
        _wait("the final exposition of every target stored",
              lambda: len(_query(base, "sum by (sglang_group) (sglang_exporter_log_lines_total) > 0")) == n, proc)
        stored = time.time()
        _wait("the rules evaluated after it", lambda: all(
            _evaluated_after(g["lastEvaluation"], stored + 1.0) for g in _rule_groups(base)), proc)
        checked, problems = 0, []
        for i in single:
            doc, dp = reports[i], reports[i]["schedulers"][0]
            for figure, rule, extra, same, applies in FIGURES:
                want = _dig(doc, figure)
                if applies == "admissions":
                    if not _same_admissions(doc, expositions[i]):
                        continue
                elif applies is not None and not applies(doc):
                    continue
                matchers = ", ".join(m for m in (f'sglang_group="log{i}"', f'dp_rank="{dp}"', 'source="log"', extra) if m)
                got = _query(base, f"{R}{rule}{{{matchers}}}")
                if want is None:
                    continue  # n/a in the report; the rules cannot know why (the queue grew, a gap)
                if len(got) != 1 or not same(want, float(got[0]["value"][1])):
                    problems.append(f"{logs[i].name}: {figure} = {want} but {rule} = "
                                    f"{[g['value'][1] for g in got]}")
                checked += 1
        assert not problems, "\n".join(problems)
        assert checked >= 100  # most logs give most figures
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        out.close()
        targets.shutdown()
        targets.server_close()

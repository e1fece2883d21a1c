"""``sglang-exporter traffic`` on SGLang's request log recorded from a real SGLang 0.5.23 server
(``tests/corpus/requestlog-0.5.23/``, ``scripts/keep_requestlog.py``): the same Poisson load of 40
requests logged at level 1 in SGLang's text format (start 0) and JSON format (start 1), beside the
benchmark client's own per-request lengths and SGLang's ``/metrics`` histograms of each start.
"""

from __future__ import annotations

import collections
import gzip
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, require_tool

KEPT = ROOT / "tests" / "corpus" / "requestlog-0.5.23"
LOG = KEPT / "server.log.gz"
CLIENT = [json.loads(x) for x in (KEPT / "client.jsonl").read_text().splitlines() if x.strip()]


def _cmd(*args, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "exporter", "traffic", *map(str, args)], capture_output=True,
                          text=True, timeout=300)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def _json(*args) -> dict:
    return json.loads(_cmd("--format", "json", *args).stdout)


@pytest.fixture(scope="module")
def model() -> dict:
    return _json("--window", "5", LOG)


def _start_log(tmp_path: Path, start: int) -> Path:
    """The part of the log one server start wrote (the text-format start, or the JSON-format one)."""
    with gzip.open(LOG, "rt") as f:
        lines = f.read().splitlines(keepends=True)
    cut = next(i for i, x in enumerate(lines) if "--log-requests-format" in x and "server_args" in x or
               "log_requests_format': 'json'" in x)
    part = tmp_path / f"start-{start}.log"
    part.write_text("".join(lines[:cut] if start == 0 else lines[cut:]))
    return part


@pytest.mark.parametrize("start, fmt", [(0, "text"), (1, "json")])
def test_each_format_gives_the_lengths_the_client_sent_plus_two_warm_ups(tmp_path, start, fmt):
    doc = _json(_start_log(tmp_path, start))
    client = CLIENT[start]
    assert doc["records"]["formats"][fmt] == client["completed"] + 2 and doc["records"]["damaged"] == 0
    # SGLang's own warm-up at start-up (8 output tokens) and the client's (its first prompt, at most 32
    # output tokens) are requests the server received: the log has them, the client's file does not
    arrivals = doc["arrivals"]
    assert arrivals["requests"] == client["completed"] + 2
    got = _pairs(_start_log(tmp_path, start))
    sent = collections.Counter(zip(client["input_lens"], client["output_lens"]))
    extra = collections.Counter(got) - sent
    assert not sent - collections.Counter(got), "a request the client sent is missing from the log"
    assert sum(extra.values()) == 2 and sorted(o for _, o in extra) == [8, min(32, client["output_lens"][0])]
    # the server's warm-up stands alone; the load (with the client's warm-up) is one period
    assert [p["requests"] for p in arrivals["periods"]] == [1, client["completed"] + 1]


def _pairs(log: Path) -> list[tuple[int, int]]:
    from exporter.report.files import read_logs
    from exporter.traffic import RequestLog

    sink = RequestLog()
    read_logs([str(log)], sink)
    return [(r.input_len, r.output_len) for r in sink.requests]


def test_lengths_and_periods_of_the_whole_log(model):
    ins = [x for c in CLIENT for x in c["input_lens"]]
    outs = [x for c in CLIENT for x in c["output_lens"]]
    assert model["input_tokens"]["count"] == len(ins) + 4
    assert model["input_tokens"]["max"] == max(ins) and model["output_tokens"]["max"] == max(outs)
    assert model["exact_arrivals"] == 1.0  # every record carries SGLang's request_received_ts
    # two starts: two load periods, two lone start-up warm-ups; the active rate leaves the idle time out
    periods = model["arrivals"]["periods"]
    assert [p["requests"] for p in periods] == [1, 41, 1, 41]
    active = model["arrivals"]["active"]
    assert active["requests"] == 82
    assert active["rate_per_second"] == pytest.approx(80 / (periods[1]["span_seconds"] + periods[3]["span_seconds"]))
    whole = (model["arrivals"]["last"] - model["arrivals"]["first"])
    assert active["rate_per_second"] > 2 * (len(ins) + 4) / whole  # not one average over the idle log
    # the client asked for Poisson arrivals at 4/s: each load period's rate is near it (40 gaps: +-40%)
    for p in (periods[1], periods[3]):
        assert 0.6 * CLIENT[0]["request_rate"] < p["rate_per_second"] < 1.4 * CLIENT[0]["request_rate"]
    w = model["arrivals"]["windows"]
    assert w["peak_rate_per_second"] >= w["mean_rate_per_second"] > 0 and w["dispersion_index"] is not None


def test_the_histograms_agree_with_the_request_log(tmp_path):
    """SGLang's /metrics length histograms between the ready and end scrapes of the JSON start count the
    same requests as that start's load period in the log, with the same mean (``_sum / _count``)."""
    hist = _json("--metrics", KEPT / "1-ready.prom", KEPT / "1-end.prom")
    log = _json(_start_log(tmp_path, 1))
    pairs = _pairs(_start_log(tmp_path, 1))[1:]  # after the ready scrape: the server's warm-up is before it
    assert hist["input_tokens"]["count"] == len(pairs) == log["arrivals"]["periods"][1]["requests"]
    assert hist["input_tokens"]["mean"] == pytest.approx(sum(i for i, _ in pairs) / len(pairs))
    assert hist["output_tokens"]["mean"] == pytest.approx(sum(o for _, o in pairs) / len(pairs))
    lo, hi = hist["input_tokens"]["buckets"]["p50"]
    assert lo < sorted(i for i, _ in pairs)[math.ceil(len(pairs) / 2) - 1] <= hi
    assert hist["arrivals"] is None and "arrival times" in hist["arrivals_reason"]


def test_a_recorded_trace_keeps_arrivals_and_lengths(tmp_path, model):
    out = tmp_path / "trace.jsonl"
    _cmd("--arrivals", "recorded", "--trace", out, LOG)
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    pairs = sorted(_pairs(LOG))
    assert sorted((r["input_length"], r["output_length"]) for r in rows) == pairs
    ts = [r["timestamp"] for r in rows]
    assert ts[0] == 0 and ts == sorted(ts)
    span_ms = 1000 * (model["arrivals"]["last"] - model["arrivals"]["first"])
    assert abs(ts[-1] - span_ms) <= 1
    assert all(len(r["hash_ids"]) == max(1, round(r["input_length"] / 128)) for r in rows)
    assert len({i for r in rows for i in r["hash_ids"]}) == sum(len(r["hash_ids"]) for r in rows)


def test_a_poisson_trace_draws_recorded_lengths_at_the_rate_asked(tmp_path):
    out = tmp_path / "p.jsonl"
    doc = _json("--trace", out, "--rate", "2.5", "--requests", "2000", "--seed", "3", LOG)
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(rows) == 2000 and doc["trace"]["requests"] == 2000 and doc["trace"]["rate_per_second"] == 2.5
    recorded = set(_pairs(LOG))
    assert all((r["input_length"], r["output_length"]) in recorded for r in rows)
    gaps = [(b["timestamp"] - a["timestamp"]) / 1000 for a, b in zip(rows, rows[1:])]
    mean = sum(gaps) / len(gaps)
    assert mean == pytest.approx(1 / 2.5, rel=0.08)  # 1999 exponential gaps: standard error 2.2%
    cv = math.sqrt(sum((g - mean) ** 2 for g in gaps) / (len(gaps) - 1)) / mean
    assert cv == pytest.approx(1.0, abs=0.1)  # exponential gaps: CV 1
    again = tmp_path / "again.jsonl"
    _cmd("--trace", again, "--rate", "2.5", "--requests", "2000", "--seed", "3", LOG)
    assert again.read_text() == out.read_text()  # seeded: the same trace
    # without --rate: the log's active arrival rate
    default = _json("--trace", tmp_path / "d.jsonl", LOG)
    assert default["trace"]["rate_per_second"] == default["arrivals"]["active"]["rate_per_second"]
    assert default["trace"]["requests"] == default["arrivals"]["requests"]


def test_damaged_records_are_counted_and_a_log_without_requests_exits_3(tmp_path):
    with gzip.open(LOG, "rt") as f:
        good = [x for x in f if "Finish: obj=" in x or '"request.finished"' in x]
    bad_text = good[0].replace("'prompt_tokens': ", "'prompt_tokens': -")
    bad_json = good[-1][: len(good[-1]) // 2] + "\n"
    log = tmp_path / "damaged.log"
    log.write_text(good[1] + bad_text + bad_json + good[-2] + "a line of something else\n")
    doc = _json(log)
    assert doc["records"]["damaged"] == 2 and doc["arrivals"]["requests"] == 2
    assert any("skipped" in w for w in doc["warnings"])
    plain = ROOT / "tests" / "corpus" / "060-real-0.5.23-steady-restart-default-interval.log"
    proc = _cmd(plain, check=False)
    assert proc.returncode == 3 and "--log-requests" in proc.stderr and len(proc.stderr.splitlines()) == 1


@pytest.mark.parametrize("args, word", [
    ([], "LOG"),
    (["/nonexistent.log"], "LOG"),
    (["--window", "0", "LOG"], "--window"),
    (["--rate", "fast", "LOG"], "--rate"),
    (["--metrics", "PROM", "--arrivals", "recorded", "--trace", "T"], "--arrivals"),
    (["--metrics", "PROM", "--trace", "T"], "--rate"),
    (["--metrics", str(LOG)], "--metrics"),
    (["--prometheus", "http://127.0.0.1:9"], "--start"),
    (["--prometheus", "http://127.0.0.1:9", "--start", "2026-01-02T00:00:00Z", "--end", "yesterday"], "--end"),
    (["--start", "1", "LOG"], "--start"),
])
def test_bad_arguments_exit_2_with_one_line(tmp_path, args, word):
    args = [str(LOG) if a == "LOG" else str(KEPT / "0-end.prom") if a == "PROM" else str(tmp_path / "t") if a == "T"
            else a for a in args]
    proc = _cmd(*args, check=False)
    assert proc.returncode == 2, proc.stderr
    assert word in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_the_report_answers_questions_3_and_5_from_the_request_log(model):
    """Checklist question 5 gives the arrival rate of the active periods (traffic's model), not the
    whole log's average; question 3 the length distribution with its mean and CV."""
    proc = subprocess.run([sys.executable, "-m", "exporter", "report", "--format", "json", str(LOG)],
                          capture_output=True, text=True, timeout=300)
    doc = json.loads(proc.stdout)
    q3, q5 = doc["checklist"][2], doc["checklist"][4]
    assert q3["answerable"] == "yes" and f"n={model['input_tokens']['count']}" in q3["answer"]
    assert f"mean {model['input_tokens']['mean']:,.0f}" in q3["answer"]
    assert q5["answerable"] == "yes"
    active = model["arrivals"]["active"]
    assert f"About {active['rate_per_second']:,.2f} requests/s while active" in q5["answer"]
    assert f"{active['requests']} requests" in q5["answer"]
    whole = model["arrivals"]["requests"] / (model["arrivals"]["last"] - model["arrivals"]["first"])
    assert active["rate_per_second"] > 3 * whole  # the idle log (start-ups, a restart) left out


def test_the_histograms_from_a_real_prometheus_over_a_time_range(tmp_path, promtool):
    """The JSON start's two scrapes backfilled into a real Prometheus (promtool tsdb create-blocks-from
    openmetrics), ten minutes and nine minutes ago: --prometheus over that range gives what the two
    files give; a range that begins before the first scrape counts from zero (the whole end scrape)."""
    import socket
    import time
    import urllib.request

    prometheus_bin = require_tool("prometheus")
    t0 = int(time.time()) - 600
    samples = []
    for name, t in (("1-ready.prom", t0), ("1-end.prom", t0 + 60)):
        samples += [f"{x} {t}" for x in (KEPT / name).read_text().splitlines() if x and not x.startswith("#")]
    (tmp_path / "in.om").write_text("\n".join(samples) + "\n# EOF\n")
    subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics", str(tmp_path / "in.om"),
                    str(tmp_path / "tsdb")], check=True, capture_output=True, timeout=120)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (tmp_path / "prometheus.yml").write_text("global: {}\n")
    prom = subprocess.Popen([prometheus_bin, f"--config.file={tmp_path / 'prometheus.yml'}",
                             f"--storage.tsdb.path={tmp_path / 'tsdb'}", f"--web.listen-address=127.0.0.1:{port}",
                             "--log.level=warn"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline and prom.poll() is None, "Prometheus did not get ready"
            time.sleep(0.2)
        files = _json("--metrics", KEPT / "1-ready.prom", KEPT / "1-end.prom")
        ranged = _json("--prometheus", url, "--start", str(t0), "--end", str(t0 + 60))
        for key in ("input_tokens", "output_tokens"):
            assert ranged[key]["count"] == files[key]["count"] == 41
            assert ranged[key]["mean"] == pytest.approx(files[key]["mean"])
            assert ranged[key]["buckets"] == files[key]["buckets"]
        assert ranged["records"]["requests"] == files["records"]["requests"] == 41
        whole = _json("--prometheus", url, "--start", str(t0 - 3600), "--end", str(t0 + 60))
        assert whole["input_tokens"]["count"] == _json("--metrics", KEPT / "1-end.prom")["input_tokens"]["count"]
        # nothing scraped in the range's end: exit 2 naming --prometheus
        proc = _cmd("--prometheus", url, "--start", str(t0 - 7200), "--end", str(t0 - 3600), check=False)
        assert proc.returncode == 2 and "--prometheus" in proc.stderr
    finally:
        prom.terminate()
        prom.wait(30)

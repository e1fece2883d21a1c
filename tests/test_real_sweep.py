"""``sglang-exporter sweep`` and ``traffic`` end to end on the real SGLang server of the test bed
(``docs/testbed.md``): a Poisson trace made by ``traffic`` from a real request log, replayed by
SGLang's own benchmark client against two values of ``--max-running-requests``, each run's log and
client file kept, then ``compare``; ``traffic`` on each run's request log must find the trace again.
The newest release only, to keep CI short. Without a built stack these tests skip locally and fail
under ``CI=true``.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from realserver_support import require_stack

from conftest import ROOT, default_sigint
from exporter.report.files import read_logs
from exporter.traffic import RequestLog
from testbed import stack
from testbed.server import BASE_FLAGS, ENV, free_port

VERSION = stack.NEWEST
KEPT = ROOT / "tests" / "corpus" / "requestlog-0.5.23"
TRACE_REQUESTS = 12
#: The client sends each request at its trace time with asyncio.sleep; on this shared 2-core machine
#: its event loop can be late by a few hundred ms when the server's processes take both cores.
ARRIVAL_SLACK_S = 0.5


def _server(model: str | Path = "") -> str:
    model = model or stack.model_dir()
    return shlex.join([str(stack.python(VERSION)), "-m", "sglang.launch_server", "--model-path", str(model),
                       *BASE_FLAGS, "--host", "127.0.0.1", "--max-total-tokens", "3000", "--decode-log-interval", "1",
                       "--log-requests", "--log-requests-level", "1", "--log-requests-format", "json"]) \
        + " --port {port} --max-running-requests {value}"


def _sweep(out: Path, trace: Path, *extra: str, model: str | Path = "", check: bool = True,
           values=("4", "16")) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "exporter", "sweep", "--server", _server(model), "--values", *values,
           "--port", str(free_port()), "--out", str(out), "--trace", str(trace),
           "--client", shlex.join([str(stack.python(VERSION)), "-m", "sglang.benchmark.serving"]), *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1500, env=dict(os.environ, **ENV))
    if check:
        assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


@pytest.fixture(scope="module")
def trace(tmp_path_factory) -> Path:
    require_stack(VERSION)
    path = tmp_path_factory.mktemp("trace") / "trace.jsonl"
    proc = subprocess.run([sys.executable, "-m", "exporter", "traffic", str(KEPT / "server.log.gz"), "--trace", str(path),
                           "--requests", str(TRACE_REQUESTS), "--rate", "4", "--seed", "1"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return path


@pytest.fixture(scope="module")
def swept(trace, tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    out = tmp_path_factory.mktemp("sweep")
    return out, _sweep(out, trace, "--ttft-slo", "30")


def test_the_sweep_runs_each_value_and_ends_in_a_compare_table(swept):
    out, proc = swept
    for v in ("4", "16"):
        assert (out / f"run-{v}-1.log").is_file() and (out / f"run-{v}-1.jsonl").is_file()
    doc = json.loads((out / "compare.json").read_text())
    assert doc["swept"] == "max_running_requests" and [g["value"] for g in doc["groups"]] == ["4", "16"]
    for g in doc["groups"]:
        f = g["figures"]
        assert f["max_running_requests"]["median"] == int(g["value"])
        assert f["p99_ttft_ms"]["median"] is not None and f["useful_tokens_per_second"]["median"] > 0
        # the client ran with --goodput ttft:30000: its SLO attainment is in the table
        assert f["slo_attainment"]["median"] is not None
    assert proc.stdout == (out / "compare.txt").read_text()
    assert "Online choice" in proc.stdout and "Latency knee" in proc.stdout or "No latency knee" in proc.stdout
    assert max(len(x) for x in proc.stdout.split("\n\n")[1].splitlines()) <= 120
    if doc["online"]["value"] is not None:
        assert doc["online"]["value"] in doc["pareto"]


def _requests(log: Path):
    sink = RequestLog()
    read_logs([str(log)], sink)
    return sorted(sink.requests, key=lambda r: r.arrival)


def test_traffic_finds_the_replayed_trace_in_each_runs_request_log(swept, trace):
    out, _ = swept
    rows = [json.loads(x) for x in trace.read_text().splitlines()]
    for v in ("4", "16"):
        reqs = _requests(out / f"run-{v}-1.log")
        # SGLang's start-up warm-up, the client's warm-up, then the trace's requests
        assert len(reqs) == TRACE_REQUESTS + 2
        load = reqs[2:]
        assert [r.output_len for r in load] == [r["output_length"] for r in rows]
        t0 = load[0].arrival
        late = [(r.arrival - t0) - row["timestamp"] / 1000 for r, row in zip(load, rows)]
        assert max(map(abs, late)) < ARRIVAL_SLACK_S, late
        # the rate of the load's period, as traffic computes it, is the trace's
        doc = json.loads(subprocess.run([sys.executable, "-m", "exporter", "traffic", "--format", "json",
                                         str(out / f"run-{v}-1.log")], capture_output=True, text=True,
                                        timeout=120, check=True).stdout)
        period = doc["arrivals"]["periods"][-1]
        trace_rate = (len(rows) - 1) / (rows[-1]["timestamp"] / 1000)
        assert period["requests"] >= TRACE_REQUESTS
        load_rate = (TRACE_REQUESTS - 1) / (load[-1].arrival - t0)
        assert abs(load_rate - trace_rate) / trace_rate < 0.1
        # the client builds each prompt from hash_ids: requests with as many ids have as many prompt tokens,
        # give or take the id's own digits (one or two tokens)
        by_blocks: dict[int, set[int]] = {}
        for r, row in zip(load, rows):
            by_blocks.setdefault(len(row["hash_ids"]), set()).add(r.input_len)
        assert all(max(n) - min(n) <= 2 for n in by_blocks.values()), by_blocks


def test_a_server_that_does_not_start_is_reported_with_its_last_log_lines(tmp_path, trace):
    proc = _sweep(tmp_path / "bad", trace, model=tmp_path / "no-such-model", values=("4",), check=False)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "run 4 #1 failed: the server exited" in proc.stderr and "last log lines" in proc.stderr
    assert "no run finished" in proc.stderr
    assert (tmp_path / "bad" / "run-4-1.log").stat().st_size > 0


def _port_users(port: int) -> list[int]:
    """Processes whose command line names ``--port PORT`` (the sweep's server and its children)."""
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"sglang.launch_server" in args and f"{port}".encode() in args:  # the server's own argv, not the sweep's
            out.append(int(pid))
    return out


def test_ctrl_c_stops_the_running_server_and_keeps_what_is_done(tmp_path, trace):
    port = free_port()
    out = tmp_path / "stopped"
    cmd = [sys.executable, "-m", "exporter", "sweep", "--server", _server(), "--values", "4", "16",
           "--port", str(port), "--out", str(out), "--trace", str(trace),
           "--client", shlex.join([str(stack.python(VERSION)), "-m", "sglang.benchmark.serving"])]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, **ENV), preexec_fn=default_sigint)
    deadline = time.monotonic() + 300
    while not _port_users(port) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    assert _port_users(port), "the server never started"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    assert "interrupted (Ctrl-C)" in err
    assert not _port_users(port), "the server outlived the sweep"
    assert (out / "run-4-1.log").is_file()

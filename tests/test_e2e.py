"""End to end: the real command on a loopback port, real files, real HTTP scrapes, real SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest
from conftest import CORPUS, samples, value
from exporter_support import DEADLINE, Exporter, command

@pytest.fixture
def log_file(tmp_path):
    path = tmp_path / "sglang.log"
    # Lines already in the file when the exporter starts are history: they must not be counted.
    path.write_text((CORPUS / "007-decode-oom-retract-tp16.log").read_text(encoding="utf-8"))
    return path


def test_live_file_scrape_and_sigterm(log_file, promtool):
    exp = Exporter("--log.path", str(log_file))
    try:
        status, body = exp.get("/healthz")
        assert (status, body.strip()) == (200, "ok")
        # Wait for the follower's first pass (it opens the file at its end) before appending.
        first = exp.wait_for(lambda m: value(m, "sglang_exporter_log_file_opens_total", path=str(log_file)) == 1,
                             "the first open of the log")
        assert value(first, "sglang_scheduler_retractions_total", stage="", dp_rank="0") is None  # history skipped

        storm = (CORPUS / "008-retraction-storm-tokens-gained-uvicorn.log").read_text(encoding="utf-8").splitlines()
        with open(log_file, "a", encoding="utf-8") as f:
            for line in storm:
                f.write(line + "\n")
                f.flush()
        m = exp.wait_for(lambda m: value(m, "sglang_scheduler_retractions_total", stage="", dp_rank="0") == 9
                         and value(m, "sglang_exporter_log_lines_total", kind="decode", result="parsed") == 14,
                         "the 9 retractions and 14 decode lines of corpus 008")
        assert value(m, "sglang_scheduler_batches_total", stage="", dp_rank="0", phase="decode") == 14 * 40
        assert value(m, "sglang_scheduler_running_requests", stage="", dp_rank="0") == 56
        assert value(m, "sglang_scheduler_recomputed_tokens_total", stage="", dp_rank="0", method="new_tokens_gained") == 7364

        # A partial line is held until its newline arrives.
        size_before = log_file.stat().st_size
        head = "[2026-09-13 16:06:13] KV cache pool is full. Retract requests. #retracted_reqs: 3, "
        with open(log_file, "a", encoding="utf-8") as f:
            f.write(head)
        exp.wait_for(lambda m: value(m, "sglang_exporter_log_bytes_read_total", path=str(log_file))
                     == size_before + len(head) - (CORPUS / "007-decode-oom-retract-tp16.log").stat().st_size,
                     "the partial line's bytes to be read")
        assert value(exp.metrics(), "sglang_scheduler_retractions_total", stage="", dp_rank="0") == 9
        with open(log_file, "a", encoding="utf-8") as f:
            f.write("#new_tokens_gained: 100, #new_token_ratio: 0.4077 -> 0.4200\n")
        m = exp.wait_for(lambda m: value(m, "sglang_scheduler_retractions_total", stage="", dp_rank="0") == 10,
                         "the completed line")
        assert value(m, "sglang_scheduler_retracted_requests_total", stage="", dp_rank="0") == 12

        status, text = exp.get("/metrics")
        lint = subprocess.run([promtool, "check", "metrics"], input=text, text=True, capture_output=True, timeout=60)
        assert lint.returncode == 0, lint.stdout + lint.stderr
        status, page = exp.get("/")
        assert status == 200 and 'href="/metrics"' in page
        assert exp.get("/nope")[0] == 404
    finally:
        code = exp.terminate()
    assert code == 0, "".join(exp.stderr_lines)


def test_start_at_end_keeps_the_servers_startup_facts(tmp_path):
    """Restarted after the server: history is not counted, but the capacity line still counts."""
    path = tmp_path / "sglang.log"
    path.write_text((CORPUS / "009-startup-cudagraph-tqdm-warmup-no-rank-tag.log").read_text(encoding="utf-8"))
    exp = Exporter("--log.path", str(path))
    try:
        m = exp.wait_for(lambda m: value(m, "sglang_exporter_log_file_opens_total", path=str(path)) == 1,
                         "the first open of the log")
        assert value(m, "sglang_scheduler_max_total_tokens", stage="", dp_rank="0") == 87552
        assert value(m, "sglang_scheduler_max_running_requests", stage="", dp_rank="0") == 2048
        assert value(m, "sglang_scheduler_batches_total", stage="", dp_rank="0", phase="prefill") == 0
        assert value(m, "sglang_exporter_log_lines_total", kind="capacity", result="parsed") == 0
    finally:
        assert exp.terminate() == 0


def test_waits_for_a_log_that_does_not_exist_yet(tmp_path):
    path = tmp_path / "later" / "sglang.log"
    exp = Exporter("--log.path", str(path), "--web.telemetry-path", "/custom")
    try:
        status, body = exp.get("/custom")
        assert status == 200
        assert value(samples(body), "sglang_exporter_log_file_present", path=str(path)) == 0
        path.parent.mkdir()
        path.write_text((CORPUS / "007-decode-oom-retract-tp16.log").read_text(encoding="utf-8"))
        end = time.monotonic() + DEADLINE
        while True:  # a file that appears after start is read from its first line
            m = samples(exp.get("/custom")[1])
            if value(m, "sglang_scheduler_retractions_total", stage="", dp_rank="0") == 2:
                break
            assert time.monotonic() < end, m
            time.sleep(0.05)
        assert value(m, "sglang_exporter_log_file_present", path=str(path)) == 1
    finally:
        assert exp.terminate() == 0


def test_demo_mode_serves_moving_metrics():
    """The README's first command: --demo replays the bundled sample and /metrics moves."""
    exp = Exporter("--demo")
    try:
        m = exp.wait_for(lambda m: (value(m, "sglang_scheduler_batches_total", stage="", dp_rank="0", phase="prefill") or 0) >= 2,
                         "prefill batches from the demo replay")
        assert value(m, "sglang_scheduler_max_total_tokens", stage="", dp_rank="0") == 87552
        before = value(m, "sglang_exporter_log_bytes_read_total",
                       path=next(dict(k[1])["path"] for k in m if k[0] == "sglang_exporter_log_bytes_read_total"))
        exp.wait_for(lambda m2: any(k[0] == "sglang_exporter_log_bytes_read_total" and v > before
                                    for k, v in m2.items()), "more demo lines")
    finally:
        assert exp.terminate() == 0


def test_address_in_use_exits_1(tmp_path):
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    port = s.getsockname()[1]
    try:
        r = subprocess.run([*command(), "--log.path", str(tmp_path / "x.log"), "--web.listen-address",
                            f"127.0.0.1:{port}"], capture_output=True, text=True, timeout=60)
    finally:
        s.close()
    assert r.returncode == 1
    assert "--web.listen-address" in r.stderr


@pytest.mark.skipif(os.name != "posix", reason="signals")
def test_sigint_also_exits_0(tmp_path):
    exp = Exporter("--log.path", str(tmp_path / "x.log"))
    exp.proc.send_signal(signal.SIGINT)
    assert exp.proc.wait(DEADLINE) == 0

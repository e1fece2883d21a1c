"""A log is a sequence of server starts: logs of many starts through ``--one-shot`` and ``report``.

A crash-looping server, or a CI log of many runs, puts start-up lines among its stats lines. Each start's
own settings (decode-log interval, ceiling) apply to its own lines, in both readers, and neither stops
on such a log (before: ``RecursionError`` while pickling the bulk path's chain of parts).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from conftest import CORPUS, value

#: Corpus 060: a real SGLang 0.5.23 server started twice into one log (interval 40, then 5).
RESTART = CORPUS / "060-real-0.5.23-steady-restart-default-interval.log"
EXPORTER = [sys.executable, "-m", "exporter"]

CAPACITY = ("[2026-12-01 21:44:56] max_total_num_tokens=20000, chunked_prefill_size=4096, max_prefill_tokens=16384, "
            "max_running_requests=16, context_len=4096, available_cpu_mem=21.05 GB\n")
DECODE = ("[2026-12-01 21:45:15] Decode batch, #running-req: 3, #token: 535, token usage: 0.03, cpu graph: False, "
          "gen throughput (token/s): 323.43, #queue-req: 0\n")


def _log_lines(path) -> list[str]:
    """The log as posted, without the corpus's three ``# `` header lines."""
    return path.read_text().splitlines(keepends=True)[3:]


def _hand_count(lines: list[str]) -> dict:
    """Prefill lines, Decode lines and decode steps of a log, each start's Decode lines times that start's
    ``decode_log_interval`` as its ``server_args`` line prints it (counted here, not by the exporter)."""
    interval, prefill, decode, steps, starts = None, 0, 0, 0, 0
    for line in lines:
        m = re.search(r"server_args=.*'decode_log_interval': (\d+)", line)
        if m:
            interval, starts = int(m.group(1)), starts + 1
        elif "Prefill batch" in line:
            prefill += 1
        elif "Decode batch" in line:
            decode += 1
            steps += interval
    return {"prefill": prefill, "decode": decode, "steps": steps, "starts": starts}


def _one_shot(path) -> str:
    out = subprocess.run([*EXPORTER, "--one-shot", "--log.path", str(path)], capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def _report(path) -> dict:
    out = subprocess.run([*EXPORTER, "report", "--format", "json", str(path)], capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)


@pytest.fixture(scope="module")
def many_starts(tmp_path_factory):
    """200 copies of corpus 060 in one file: 400 starts, past the size where the bulk path uses workers."""
    lines = _log_lines(RESTART)
    path = tmp_path_factory.mktemp("starts") / "starts.log"
    path.write_text("".join(lines) * 200)
    return path, _hand_count(lines * 200)


def test_a_log_of_hundreds_of_starts_counts_each_starts_lines_with_its_own_interval(many_starts):
    path, hand = many_starts
    assert hand["starts"] == 400
    text = _one_shot(path)
    doc = _report(path)
    assert value(text, "sglang_scheduler_batches_total", dp_rank="0", phase="prefill", stage="") == hand["prefill"]
    assert value(text, "sglang_scheduler_batches_total", dp_rank="0", phase="decode", stage="") == hand["steps"]
    assert doc["lines"]["parsed"]["server_args"] == hand["starts"] == doc["starts"]["count"]
    assert doc["lines"]["parsed"]["decode"] == hand["decode"]
    assert (doc["retractions"]["prefill_batches"], doc["retractions"]["decode_steps"]) == (hand["prefill"],
                                                                                          hand["steps"])


def test_start_up_lines_alternating_with_stats_lines_are_read_by_both(tmp_path):
    """60,000 pairs of a capacity line and a Decode line (19 MB: the bulk path's workers), as the issue
    reproduced with 150,000: ``--one-shot`` died in the bulk path; both now read every line."""
    n = 60_000
    path = tmp_path / "alternating.log"
    path.write_text((CAPACITY + DECODE) * n)
    text = _one_shot(path)
    doc = _report(path)
    # no server_args line: SGLang's default interval (40) is assumed, and said so
    assert value(text, "sglang_scheduler_batches_total", dp_rank="0", phase="decode", stage="") == 40 * n
    assert value(text, "sglang_scheduler_decode_log_interval", dp_rank="0", source="default", stage="") == 40
    assert value(text, "sglang_exporter_log_lines_total", kind="capacity", result="parsed") == n
    assert value(text, "sglang_exporter_log_lines_total", kind="decode", result="parsed") == n
    assert (doc["lines"]["parsed"]["capacity"], doc["lines"]["parsed"]["decode"]) == (n, n)
    assert doc["starts"]["count"] == n  # each capacity line after a stats line opens a start (no server_args)
    assert doc["retractions"]["decode_steps"] == 40 * n


def _per_start(lines: list[str]) -> list[dict]:
    """Each start's own lines and printed settings, counted here from the text."""
    starts: list[dict] = []
    for line in lines:
        if "server_args=" in line:
            starts.append({"interval": int(re.search(r"'decode_log_interval': (\d+)", line).group(1)),
                           "prefill": 0, "decode": 0, "max_running": 0})
        elif starts and "max_total_num_tokens=" in line:
            starts[-1]["ceiling"] = int(re.search(r"max_running_requests=(\d+)", line).group(1))
            starts[-1]["capacity"] = int(re.search(r"max_total_num_tokens=(\d+)", line).group(1))
        elif starts and "Prefill batch" in line:
            starts[-1]["prefill"] += 1
        elif starts and "Decode batch" in line:
            starts[-1]["decode"] += 1
            running = int(re.search(r"#running-req: (\d+)", line).group(1))
            starts[-1]["max_running"] = max(starts[-1]["max_running"], running)
    return starts


def test_the_report_of_corpus_060_lists_its_two_starts_each_with_its_settings_and_figures(tmp_path):
    """The issue: ``report`` on corpus 060 (interval 40 then 5, ceiling 16 then 8) showed the last start's
    settings beside the whole log's distribution ("ceiling 8" next to a max batch of 13) and never said
    the server restarted."""
    hand = _per_start(_log_lines(RESTART))
    assert [(h["interval"], h["ceiling"]) for h in hand] == [(40, 16), (5, 8)]
    doc = _report(RESTART)
    starts = doc["starts"]["starts"]
    assert doc["starts"]["count"] == 2 and doc["starts"]["verdict"]["code"] == "restarted"
    for got, want in zip(starts, hand):
        assert (got["decode_log_interval"], got["decode_log_interval_source"]) == (want["interval"], "server_args")
        assert (got["max_running_requests"], got["max_total_num_tokens"]) == (want["ceiling"], want["capacity"])
        assert (got["prefill_batches"], got["decode_lines"]) == (want["prefill"], want["decode"])
        assert got["decode_steps"] == want["decode"] * want["interval"]
        assert got["decode_batch"]["max"] == want["max_running"]
    # the first start's batch reached 13 under its own ceiling of 16; the second never passed its 8
    assert starts[0]["decode_batch"]["max"] <= 16 and starts[1]["decode_batch"]["max"] <= 8
    text = subprocess.run([*EXPORTER, "report", str(RESTART)], capture_output=True, text=True, timeout=120).stdout
    block = text.split("Server starts\n", 1)[1].split("\n\n", 1)[0]
    assert "interval 40 (server_args), ceiling 16" in block and "interval 5 (server_args), ceiling 8" in block
    html = tmp_path / "r.html"
    subprocess.run([*EXPORTER, "report", "--format", "html", "--output", str(html), str(RESTART)], check=True,
                   capture_output=True, timeout=120)
    assert "Server starts" in html.read_text() and "ceiling 16" in html.read_text()


def test_a_log_with_one_start_has_no_starts_block_in_text(tmp_path):
    doc = _report(CORPUS / "061-real-0.5.23-kv-pressure-retractions-interval-1.log")
    assert doc["starts"]["count"] == 1 and doc["starts"]["verdict"]["code"] == "one"
    text = subprocess.run([*EXPORTER, "report", str(CORPUS / "061-real-0.5.23-kv-pressure-retractions-interval-1.log")],
                          capture_output=True, text=True, timeout=120).stdout
    assert "Server starts" not in text

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
    assert doc["lines"]["parsed"]["server_args"] == hand["starts"]
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
    assert doc["retractions"]["decode_steps"] == 40 * n

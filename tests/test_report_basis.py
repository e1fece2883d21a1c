"""The report takes the scheduler state's figures, so it agrees with ``--one-shot`` over the same log.

Each counting rule is written once (``exporter/scheduler/rules.py``): the report's admissions, decode
steps, prefill batches and retractions are the state's counters, the same samples that
``sglang-exporter --one-shot`` serves, and its per-window figures add up to them.
"""

from __future__ import annotations

import pytest
from conftest import CORPUS, samples
from exporter_support import one_shot

from exporter.report import Recorder, analyse, read_logs

#: Plain SGLang logs with Prefill lines: the mixed-chunk ones (069, 070: a chunk's budget is
#: chunked_prefill_size less the running requests), two starts of different intervals (060), DP ranks
#: (062, 063), TP ranks (067), 2024-era chunked prefill (020), no start-up lines (008).
LOGS = ["069-real-0.5.23-mixed-chunk-budget-less-running.log",
        "070-real-0.5.23-mixed-chunk-kv-pressure-retraction.log",
        "060-real-0.5.23-steady-restart-default-interval.log",
        "062-real-0.5.23-dp2-two-schedulers.log",
        "063-real-0.5.18-dp2-serverargs-repr.log",
        "067-real-0.5.23-tp2-retractions-on-both-tp-ranks.log",
        "020-chunked-prefill-cache-hit-rate-percent-2024.log",
        "008-retraction-storm-tokens-gained-uvicorn.log"]


def report(path) -> dict:
    rec = Recorder()
    return analyse(rec, read_logs([str(path)], rec, progress=False))


def total(text: str, name: str, **labels) -> float:
    """A metric summed over the samples that carry ``labels`` (all DP ranks, plain SGLang's stage)."""
    return sum(v for (n, lab), v in samples(text).items()
               if n == name and dict(lab).get("stage") == "" and all(dict(lab).get(k) == w for k, w in labels.items()))


@pytest.mark.parametrize("name", LOGS)
def test_report_figures_are_one_shots(name):
    path = CORPUS / name
    doc, text = report(path), one_shot(path)
    admitted = total(text, "sglang_scheduler_admitted_requests_total")
    assert admitted > 0
    assert doc["queue_latency"]["admitted_requests"] == admitted
    assert doc["queue_latency"]["admitted_requests_source"].startswith("scheduler state")
    r = doc["retractions"]
    assert r["prefill_batches"] == total(text, "sglang_scheduler_batches_total", phase="prefill")
    assert r["decode_steps"] == total(text, "sglang_scheduler_batches_total", phase="decode")  # steps
    assert r["events"] == total(text, "sglang_scheduler_retractions_total")
    assert r["requests"] == total(text, "sglang_scheduler_retracted_requests_total")
    # every line is time-stamped in these logs: the windows add up to the state's batches
    assert sum(w["batches"] for w in r["windows"]) == r["batches"] == r["prefill_batches"] + r["decode_steps"]
    assert sum(w["retractions"] for w in r["windows"]) == r["events"]


def test_two_starts_of_different_intervals_count_each_line_with_its_own():
    # Corpus 060: a start with decode_log_interval 40, then one with 5. Each Decode line is worth the
    # steps of the interval in effect when it was printed (the state's rule); the windows used the last
    # interval for every line (1,267 batches against the state's 2,457).
    doc = report(CORPUS / LOGS[2])
    r = doc["retractions"]
    assert sum(w["batches"] for w in r["windows"]) == r["batches"] == 2457
    # Two lines of the first start (21:45:23, 21:45:29) print a gen throughput whose step (57 and 88 ms)
    # is longer than their gap over 40 steps allows (25 and 50 ms): left out, the mean step is
    # 9.96 ms, not 12.04 ms (checked by hand).
    q = doc["queue_latency"]
    assert q["decode_step_source"] == "gen throughput" and q["decode_step_lines"] == 217
    assert q["decode_step_seconds"] == pytest.approx(0.00996, abs=5e-5)


def test_without_a_chunk_size_admissions_are_an_upper_bound_said_beside_the_figure(tmp_path, capsys):
    # Corpus 020 (2024, no start-up lines): 7 Prefill lines of #new-seq 2 and #new-token 2048 while the
    # queue falls by one a line: one new request and one continuing chunk each. Without the chunk size
    # the state sums #new-seq (14), and the text says beside the figure that it is at most that; given
    # SGLang's --chunked-prefill-size both the report and --one-shot count 2 + 6 x 1 = 8.
    from exporter.cli import main
    from exporter_support import one_shot_run

    path = CORPUS / "020-chunked-prefill-cache-hit-rate-percent-2024.log"
    assert main(["report", str(path)]) == 0
    row = next(x for x in capsys.readouterr().out.splitlines() if "admitted requests / admission rate" in x)
    assert " 14 / " in row and "at most" in row and "--chunked-prefill-size" in row
    code, text = one_shot_run(path, "--sglang.chunked-prefill-size", "2048")
    assert code == 0 and total(text, "sglang_scheduler_admitted_requests_total") == 8
    assert main(["report", "--chunked-prefill-size", "2048", str(path)]) == 0
    row = next(x for x in capsys.readouterr().out.splitlines() if "admitted requests / admission rate" in x)
    assert " 8 / " in row and "at most" not in row

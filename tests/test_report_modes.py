"""Issue 34: the report in scheduling modes whose events the log cannot show, and the smaller report
items of a new user's pass on the corpus; each on a real log of tests/corpus/."""

from __future__ import annotations

from conftest import CORPUS
from report_support import report_files

#: A real SGLang 0.5.23 server with --enable-priority-scheduling (test bed scenario
#: priority-preemption): SGLang admitted 26 times for 25 requests (one priority preemption, no line).
PRIORITY = CORPUS / "068-real-0.5.23-priority-preemption-no-line.log"
#: A plain real server under KV pressure, priority scheduling off (server_args).
KV_PRESSURE = CORPUS / "061-real-0.5.23-kv-pressure-retractions-interval-1.log"
STEADY = CORPUS / "060-real-0.5.23-steady-restart-default-interval.log"


def test_priority_scheduling_on_is_no_confident_zero_retractions_or_recompute():
    doc = report_files(PRIORITY)
    r, t = doc["retractions"], doc["throughput"]
    assert r["events"] == 0  # no retraction line: the preemption printed nothing
    assert r["verdict"]["code"] == "preemptions_unseen"
    assert "never ran out" not in r["verdict"]["text"].replace("does not mean KV memory never ran out", "")
    assert "enable_priority_scheduling=True" in r["verdict"]["text"]
    assert t["verdict"]["code"] == "unknown_recompute"
    assert "No recomputed tokens" not in t["verdict"]["text"]
    assert t["recompute_share"] is None and t["useful_tokens"] is None
    assert "priority" in t["not_available"]["recompute_share"]
    # what the log does show stays: SGLang's prefill_compute of the same run was 3,619 tokens
    assert t["prefill_computed_tokens"] == 3619


def test_priority_scheduling_off_keeps_the_facts():
    doc = report_files(STEADY)
    assert doc["retractions"]["verdict"]["code"] == "none"
    assert doc["throughput"]["verdict"]["code"] == "real"
    kv = report_files(KV_PRESSURE)
    assert kv["retractions"]["events"] > 0
    assert "Priority preemptions" not in kv["retractions"]["verdict"]["text"]
    assert kv["throughput"]["recompute_share"] is not None

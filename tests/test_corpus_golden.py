"""Golden tests: the real command in one-shot mode over every real log of tests/corpus/.

Each golden file (tests/golden/<log name>.json) holds the scheduler samples (histogram buckets
aside) and the line counts by kind and result that `sglang-exporter --one-shot` reports for that log.
Every golden file was checked by hand once against the log itself; the checks are recorded in
tests/golden/CHECKED.md. Regenerate after a deliberate change with
`UPDATE_GOLDEN=1 python -m pytest tests/test_corpus_golden.py` and check the diff by hand again.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import CORPUS, corpus_files, samples
from exporter_support import one_shot, one_shot_run


GOLDEN = Path(__file__).parent / "golden"
# Samples whose value depends on the machine or the moment, not on the log.
VOLATILE = ("sglang_exporter_last_line_timestamp_seconds", "sglang_exporter_collector_duration_seconds",
            "sglang_exporter_build_info", "sglang_scheduler_last_stats_line_timestamp_seconds")


def summarise(text: str) -> dict:
    summary: dict[str, dict[str, float]] = {"lines": {}, "scheduler": {}}
    for (name, labels), v in sorted(samples(text).items()):
        if name.startswith(VOLATILE) or name.endswith("_bucket"):
            continue
        if name == "sglang_exporter_log_lines_total":
            if v:
                d = dict(labels)
                summary["lines"][f"{d['kind']}/{d['result']}"] = v
        elif name.startswith("sglang_scheduler_"):
            label_text = ",".join(f"{k}={val}" for k, val in labels)
            summary["scheduler"][f"{name}{{{label_text}}}"] = round(v, 6)
    return summary


@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: p.name[:3])
def test_golden(path: Path):
    code, text = one_shot_run(path)
    got = summarise(text)
    golden = GOLDEN / (path.stem + ".json")
    if os.environ.get("UPDATE_GOLDEN"):
        golden.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    want = json.loads(golden.read_text())
    assert got == want
    # Exit status 3 exactly when no line is an SGLang scheduler line (the command warns about it).
    assert code == (0 if any(key.endswith("/parsed") for key in got["lines"]) else 3)
    # Every line of the file is accounted for exactly once (the tailer keeps no line back).
    total_lines = len(path.read_text(encoding="utf-8", errors="replace").splitlines())
    assert sum(got["lines"].values()) == total_lines


def test_whole_corpus_totals():
    """The totals quoted in the closing note of the core issue."""
    totals: dict[str, float] = {}
    for path in corpus_files():
        for key, v in summarise(one_shot_run(path)[1])["lines"].items():
            result = key.split("/")[1]
            totals[result] = totals.get(result, 0) + v
    files = len(corpus_files())
    print(f"\ncorpus: {files} files, {sum(totals.values()):.0f} lines, "
          + ", ".join(f"{k} {v:.0f}" for k, v in sorted(totals.items())))
    assert files == len(list(CORPUS.glob("*.log")))
    assert totals["parsed"] > 0 and totals["ignored"] > 0 and totals["malformed"] > 0


def test_headline_numbers_of_the_core_issue():
    storm = samples(one_shot(CORPUS / "008-retraction-storm-tokens-gained-uvicorn.log"))
    assert storm[("sglang_scheduler_retractions_total", (("dp_rank", "0"), ("stage", "")))] == 9
    tp16 = samples(one_shot(CORPUS / "007-decode-oom-retract-tp16.log"))
    assert tp16[("sglang_scheduler_retractions_total", (("dp_rank", "0"), ("stage", "")))] == 2
    assert tp16[("sglang_scheduler_retracted_requests_total", (("dp_rank", "0"), ("stage", "")))] == 2


def test_corpus_is_pinned_and_indexed():
    """Every corpus log is pinned by SHA256SUMS and has a row in INDEX.md, so that a log cannot change
    under its golden, or arrive without its source, unnoticed."""
    import hashlib

    sums = {}
    for row in (CORPUS / "SHA256SUMS").read_text().splitlines():
        digest, _, name = row.partition("  ")
        sums[name] = digest
    logs = {p.name: p for p in corpus_files()}
    assert set(sums) == set(logs)
    index = (CORPUS / "INDEX.md").read_text(encoding="utf-8")
    for name, path in logs.items():
        assert hashlib.sha256(path.read_bytes()).hexdigest() == sums[name], f"{name} changed; re-check its golden"
        assert f"| {name} |" in index, f"{name} has no row in INDEX.md"

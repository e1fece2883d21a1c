"""Build a large, realistic SGLang log from the real corpus lines (deterministic, stdlib only).

Every line of the output is a line of ``tests/corpus/*.log`` (header lines excluded), picked by
kind with the proportions below, so every prefix style and SGLang era in the corpus appears. Only the
date-time of each line's prefix is rewritten to a clock that advances steadily (about 20 lines per
second of log time), as in a live server's log; everything else is verbatim. Kinds are assigned by
the exporter's own parser, which is the one thing the bench takes from the package.

Usage: ``python bench/genlog.py OUT [LINES] [CORPUS_DIR]``
"""

from __future__ import annotations

import datetime as _dt
import glob
import os
import random
import re
import sys

#: Share of lines by kind. A busy server prints a Decode line per DP rank every 40 decode steps, a
#: Prefill line per prefill batch, an access-log line per request, and rarely a retraction; damaged
#: lines (terminal cuts, two writers) are rare.
PROPORTIONS = {
    "decode": 0.55,
    "prefill": 0.20,
    "retraction": 0.005,
    "malformed": 0.001,
    "other": 0.244,
}
LINES_PER_LOG_SECOND = 20
_DATETIME = re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d")
_HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_CORPUS = os.path.normpath(os.path.join(_HERE, "..", "tests", "corpus"))


def corpus_lines(corpus_dir: str) -> dict[str, list[str]]:
    """Corpus lines grouped by kind (``decode``, ``prefill``, ``retraction``, ``malformed``, ``other``)."""
    from exporter.events import KIND_OF
    from exporter.sources.log.parser import Malformed, parse_line

    groups: dict[str, list[str]] = {k: [] for k in PROPORTIONS}
    files = sorted(glob.glob(os.path.join(corpus_dir, "*.log")))
    if not files:
        raise SystemExit(f"no corpus logs in {corpus_dir}")
    for path in files:
        with open(path, encoding="utf-8", errors="replace", newline="") as f:
            lines = f.read().split("\n")
        for i, line in enumerate(lines):
            line = line.rstrip("\r")
            if (i < 3 and line.startswith("# ")) or not line:
                continue
            ev = parse_line(line)
            if ev is None:
                kind = "other"
            elif type(ev) is Malformed:
                kind = "malformed"
            else:
                kind = KIND_OF[type(ev)]
            if kind in groups:
                groups[kind].append(line)
    return groups


def build(out: str, n_lines: int, corpus_dir: str = DEFAULT_CORPUS, seed: int = 8) -> dict:
    """Write ``n_lines`` lines to ``out``; returns the count per kind and the byte size."""
    groups = corpus_lines(corpus_dir)
    rng = random.Random(seed)
    kinds = list(PROPORTIONS)
    weights = [PROPORTIONS[k] for k in kinds]
    picks = rng.choices(kinds, weights, k=n_lines)
    counts = {k: 0 for k in kinds}
    t0 = _dt.datetime(2026, 9, 13, 16, 0, 0)
    stamp_cache: dict[int, str] = {}
    with open(out, "w", encoding="utf-8", newline="\n") as f:
        buf = []
        for i, kind in enumerate(picks):
            counts[kind] += 1
            line = rng.choice(groups[kind])
            sec = i // LINES_PER_LOG_SECOND
            stamp = stamp_cache.get(sec)
            if stamp is None:
                stamp_cache.clear()
                stamp = stamp_cache[sec] = (t0 + _dt.timedelta(seconds=sec)).strftime("%Y-%m-%d %H:%M:%S")
            line = _DATETIME.sub(stamp, line, count=1)
            buf.append(line)
            if len(buf) >= 10000:
                f.write("\n".join(buf) + "\n")
                buf.clear()
        if buf:
            f.write("\n".join(buf) + "\n")
    return {"lines": n_lines, "bytes": os.path.getsize(out), "by_kind": counts,
            "distinct_templates": {k: len(v) for k, v in groups.items()}}


if __name__ == "__main__":
    out = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 2_000_000
    corpus = sys.argv[3] if len(sys.argv) > 3 else DEFAULT_CORPUS
    print(build(out, n, corpus))

"""Build a large, realistic SGLang log from the real corpus lines (deterministic, stdlib only).

Every line of the output is a line of ``tests/corpus/*.log`` (header lines excluded), picked by
kind with the proportions below, so every prefix style and SGLang era in the corpus appears. Only the
date-time of each line's prefix is rewritten to a clock that advances steadily (about 20 lines per
second of log time), as in a live server's log; everything else is verbatim. Kinds are assigned by
the exporter's own parser, which is the one thing the bench takes from the package.

:func:`build_real` writes the other two bench logs from one real server's recorded output
(``tests/corpus/060-real-0.5.23-*``, from the test bed): ``real-output``, its start-up lines once at
the top and its steady state (first to last stats line of the first run) repeated, and
``restarts``, the same with the start-up block again every 100,000 lines, as a server restarted
by its supervisor prints it. Timestamps are re-clocked as above.

Usage: ``python bench/genlog.py OUT [LINES] [CORPUS_DIR]``, or
``python bench/genlog.py --real {real-output,restarts} OUT [LINES] [REAL_LOG]``
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


#: SGLang Omni's own line format (``2026-12-01 19:47:25,340 [INFO] ...``; corpus 064-066): a pipeline's
#: log, not an SGLang server's, so left out of the bench log (such lines take the stage attribution's
#: per-line path, and a few of them in every block would measure that path instead).
_OMNI_LINE = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} \[[A-Z]{4,8}\] ")


def corpus_lines(corpus_dir: str) -> dict[str, list[str]]:
    """Corpus lines grouped by kind (``decode``, ``prefill``, ``retraction``, ``malformed``, ``other``);
    SGLang Omni's lines are left out (``_OMNI_LINE``)."""
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
            if (i < 3 and line.startswith("# ")) or not line or _OMNI_LINE.match(line):
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


#: The recorded real server's log (``tests/corpus``): start-up, a steady run, a restart appended.
DEFAULT_REAL = os.path.join(DEFAULT_CORPUS, "060-real-0.5.23-steady-restart-default-interval.log")
#: Lines between two start-up blocks in the ``restarts`` log.
RESTART_EVERY = 100_000


def real_parts(path: str = DEFAULT_REAL) -> tuple[list[str], list[str]]:
    """``(start-up lines, steady lines)`` of a recorded log: the lines before its first stats line
    (its ``#`` header left out), and those from the first stats line to the last one before the
    next ``server_args`` (a restart's). Stats lines are the exporter parser's Prefill/Decode/
    retraction events."""
    from exporter.events import KIND_OF
    from exporter.sources.log.parser import Malformed, parse_line

    with open(path, encoding="utf-8", errors="replace", newline="") as f:
        lines = [ln.rstrip("\r") for ln in f.read().split("\n")]
    lines = [ln for i, ln in enumerate(lines) if ln and not (i < 3 and ln.startswith("# "))]
    stats = []
    for i, line in enumerate(lines):
        ev = parse_line(line)
        if ev is not None and type(ev) is not Malformed and KIND_OF[type(ev)] in ("decode", "prefill", "retraction"):
            stats.append(i)
    if not stats:
        raise SystemExit(f"no stats lines in {path}")
    restart = next((i for i in range(stats[0], len(lines)) if "server_args=" in lines[i]), len(lines))
    last = max(i for i in stats if i < restart)
    return lines[:stats[0]], lines[stats[0]:last + 1]


def build_real(out: str, n_lines: int, kind: str = "real-output", path: str = DEFAULT_REAL,
               every: int = RESTART_EVERY) -> dict:
    """Write ``n_lines`` lines of a ``real-output`` or ``restarts`` log (module docstring) to
    ``out``, the latter with a start-up block every ``every`` lines; returns the line count, byte
    size and start-up blocks written."""
    startup, steady = real_parts(path)
    every = every if kind == "restarts" else None
    if kind not in ("real-output", "restarts"):
        raise ValueError(f"unknown real log kind {kind!r}")
    t0 = _dt.datetime(2026, 9, 13, 16, 0, 0)
    blocks = 0
    with open(out, "w", encoding="utf-8", newline="\n") as f:
        buf: list[str] = []
        i = j = 0
        while i < n_lines:
            if i == 0 or (every and i % every == 0):
                block, blocks = startup[:n_lines - i], blocks + 1
            else:
                block = [steady[j % len(steady)]]
                j += 1
            stamp = (t0 + _dt.timedelta(seconds=i // LINES_PER_LOG_SECOND)).strftime("%Y-%m-%d %H:%M:%S")
            buf.extend(_DATETIME.sub(stamp, ln, count=1) for ln in block)
            i += len(block)
            if len(buf) >= 10000:
                f.write("\n".join(buf) + "\n")
                buf.clear()
        if buf:
            f.write("\n".join(buf) + "\n")
    return {"lines": n_lines, "bytes": os.path.getsize(out), "kind": kind, "source": os.path.basename(path),
            "startup_lines": len(startup), "steady_lines": len(steady), "startup_blocks": blocks}


if __name__ == "__main__":
    if sys.argv[1] == "--real":
        kind, out = sys.argv[2], sys.argv[3]
        n = int(sys.argv[4]) if len(sys.argv) > 4 else 2_000_000
        print(build_real(out, n, kind, sys.argv[5] if len(sys.argv) > 5 else DEFAULT_REAL))
        sys.exit(0)
    out = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 2_000_000
    corpus = sys.argv[3] if len(sys.argv) > 3 else DEFAULT_CORPUS
    print(build(out, n, corpus))

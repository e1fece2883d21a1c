#!/usr/bin/env python3
"""Series per scheduler and bytes per scrape at 1, 8 and 64 DP ranks, with the default (budget)
buckets and with ``--sglang.fine-buckets`` (every bucket: what the exporter served before the series
budget, issue 36), side by side.

Each input is a real log of ``tests/corpus`` whose every prefixed line is written once per DP rank,
re-tagged ``[<time> DP<d> TP0]`` (the start-up capacity line and server_args included, so each rank
has its ceiling); lines without a prefix are kept once. The command reads the file with
``--one-shot`` (the same families ``/metrics`` serves, in the text format) and the output is counted:
``sglang_scheduler_*`` series divided by the DP ranks, every series, the body's bytes and its gzip
size (Prometheus asks for gzip). Inputs:

* ``060``: the test bed's real SGLang 0.5.23 server (max_running_requests 16, a CPU server);
* ``009``: a 2026-09 GPU server's start-up and traffic (max_running_requests 2048).

Usage: ``python3 bench/series.py [--ranks 1,8,64] [--json PATH]``. Prints a Markdown table; counts
are not timed, so the machine's load does not change them.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import subprocess
import sys
import tempfile

_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(_HERE)
_PREFIX = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?)\] ")
INPUTS = {"060": "real SGLang 0.5.23, max_running_requests 16", "009": "GPU server, max_running_requests 2048"}


def dp_log(source: str, ranks: int, out: str) -> None:
    """Write ``source``'s lines to ``out``, each prefixed line once per DP rank (re-tagged)."""
    with open(source, encoding="utf-8", errors="replace") as f, open(out, "w", encoding="utf-8") as w:
        for line in f:
            if line.startswith("# "):
                continue
            m = _PREFIX.match(line)
            if m is None:
                w.write(line)
                continue
            body = line[m.end():]
            for d in range(ranks):
                w.write(f"[{m.group(1)} DP{d} TP0] {body}")


def measure(path: str, fine: bool) -> dict:
    """Counts of one one-shot output: scheduler series, all series, bytes, gzip bytes."""
    args = [sys.executable, "-m", "exporter", "--log.path", path, "--one-shot"]
    if fine:
        args += ["--sglang.fine-buckets", "true"]
    body = subprocess.run(args, capture_output=True, check=True, cwd=_ROOT).stdout
    lines = [ln for ln in body.decode().splitlines() if ln and not ln.startswith("#")]
    return {"scheduler_series": sum(ln.startswith("sglang_scheduler_") for ln in lines), "series": len(lines),
            "bytes": len(body), "gzip_bytes": len(gzip.compress(body, 6))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", default="1,8,64")
    ap.add_argument("--json", default=None, help="also write the figures here")
    args = ap.parse_args()
    ranks = [int(r) for r in args.ranks.split(",")]
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for prefix, what in INPUTS.items():
            source = next(os.path.join(_ROOT, "tests", "corpus", n) for n in sorted(os.listdir(
                os.path.join(_ROOT, "tests", "corpus"))) if n.startswith(prefix + "-"))
            for n in ranks:
                path = os.path.join(tmp, f"{prefix}-dp{n}.log")
                dp_log(source, n, path)
                row = {"input": prefix, "what": what, "dp_ranks": n}
                for mode, fine in (("fine", True), ("default", False)):
                    row[mode] = measure(path, fine)
                results.append(row)
    print("| input | DP ranks | sched. series per scheduler: all buckets -> default | series per scrape | "
          "bytes per scrape | gzip bytes |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in results:
        f, d, n = r["fine"], r["default"], r["dp_ranks"]
        print(f"| {r['input']} ({r['what']}) | {n} | {f['scheduler_series'] / n:.0f} -> **{d['scheduler_series'] / n:.0f}** | "
              f"{f['series']:,} -> {d['series']:,} | {f['bytes']:,} -> {d['bytes']:,} | "
              f"{f['gzip_bytes']:,} -> {d['gzip_bytes']:,} |")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as w:
            json.dump(results, w, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

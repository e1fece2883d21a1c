#!/usr/bin/env python3
"""Idle cost of a glob over many files: the live command following ``DIR/*.log`` with N files in DIR.

    python3 bench/files.py                          # 10 and 3,000 files, 20 s idle each
    python3 bench/files.py --files 10,3000 --idle-seconds 30 --extra='--log.max-files-per-glob 3000'

For each N: N small log files (real lines of tests/corpus), the command started on the glob
(``--gpu.enabled false``), then nothing written for ``--idle-seconds``: CPU share of one core of
the process over that window (``/proc``, all threads), its RSS, its open file descriptors and the
number of series one scrape returns. An idle exporter should cost the same whatever N is: files
beyond ``--log.max-files-per-glob`` are not followed, and the glob's directory is not listed on
every timer pass. Prints a table and writes JSON (``--json``, default ``bench/results-files.json``).
Speed is reported, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))

from run import _cpu_model, _free_port, _proc_cpu_rss, _stop, _wait_healthy  # noqa: E402


def _files(directory: Path, n: int) -> None:
    line = next(row for row in (ROOT / "tests" / "corpus" / "008-retraction-storm-tokens-gained-uvicorn.log")
                .read_text(encoding="utf-8").splitlines() if "Decode batch" in row)
    for i in range(n):
        (directory / f"rank-{i:04d}.log").write_text(line + "\n")


def measure(n: int, idle_seconds: float, extra: list[str], work: Path) -> dict:
    directory = work / f"logs-{n}"
    directory.mkdir()
    _files(directory, n)
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "exporter", "--log.path", str(directory / "*.log"),
           "--web.listen-address", f"127.0.0.1:{port}", "--gpu.enabled", "false", *extra]
    err = work / f"err-{n}"
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=open(err, "wb"))
    try:
        _wait_healthy(base, proc, err)
        time.sleep(2.0)  # let start-up settle
        cpu0, _ = _proc_cpu_rss(proc.pid)
        t0 = time.perf_counter()
        time.sleep(idle_seconds)
        cpu1, rss = _proc_cpu_rss(proc.pid)
        elapsed = time.perf_counter() - t0
        fds = len(os.listdir(f"/proc/{proc.pid}/fd"))
        with urllib.request.urlopen(base + "/metrics", timeout=30) as r:
            series = sum(1 for row in r.read().decode().splitlines() if row and not row.startswith("#"))
        return {"files": n, "cpu_pct_of_core_idle": round(100.0 * (cpu1 - cpu0) / elapsed, 3),
                "rss_mb": round(rss, 1), "open_fds": fds, "series": series, "idle_seconds": round(elapsed, 1),
                "command": " ".join(cmd[1:]).replace(str(work), "<workdir>")}
    finally:
        _stop(proc)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", default="10,3000", help="comma-separated file counts (default 10,3000)")
    ap.add_argument("--idle-seconds", type=float, default=20.0, help="idle window per count (default 20)")
    ap.add_argument("--extra", default="", help="more flags for the command, one string")
    ap.add_argument("--json", default=str(BENCH / "results-files.json"), help="where to write the results")
    args = ap.parse_args()
    extra = args.extra.split()
    with tempfile.TemporaryDirectory(prefix="sglang-exporter-files-") as tmp:
        rows = [measure(int(n), args.idle_seconds, extra, Path(tmp)) for n in args.files.split(",")]
    res = {"machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "cpu": _cpu_model()},
           "rows": rows}
    Path(args.json).write_text(json.dumps(res, indent=2) + "\n")
    print("| files | idle CPU % of a core | RSS MB | open fds | series |")
    print("|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['files']:,} | {r['cpu_pct_of_core_idle']:.2f} | {r['rss_mb']:.1f} | {r['open_fds']} | {r['series']:,} |")
    print(f"written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Memory of the served command at a number of DP ranks: RSS as ``VmHWM`` (the peak, what a
container's memory limit meets) after text scrapes and after an OpenMetrics scrape, and the bytes
each series costs.

For each rank count the real command (``python -m exporter``, GPU metrics off, ``MALLOC_ARENA_MAX``
as the container image sets it) follows an empty
file; once it is healthy its ``VmRSS`` is the baseline (imported code, threads). Then the bench log's
Prefill/Decode/retraction lines re-tagged ``DP<d> TP<d mod 8>`` for d = 0..ranks-1
(``bench/render.py``'s ``_dp_lines``, stamped now so no scheduler is idle) are appended at once, and
``/metrics`` is scraped until the exporter's own ``sglang_exporter_log_lines_total`` counts them all
(deadline 300 s). Three more text scrapes, then ``VmHWM``/``VmRSS``; one OpenMetrics scrape (the
``Accept`` header Prometheus sends), then ``VmHWM``/``VmRSS`` again. ``bytes_per_series`` is
``(VmHWM - baseline) / series`` after each step, ``series`` the sample lines of the text body.

Run by ``bench/run.py``; prints one JSON object.

Usage: ``python bench/memory.py LOG [RANKS ...] [--tp-tags N]`` (default 8 256, one TP tag).
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _HERE)
from render import _dp_lines  # noqa: E402 - the render bench's re-tagging

#: What Prometheus 2.x/3.x sends first (scrape_protocols default): OpenMetrics, then the text format.
PROMETHEUS_ACCEPT = ("application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
                     "text/plain;version=0.0.4;q=0.5,*/*;q=0.1")
#: glibc malloc arenas, as the container image sets them (Dockerfile; ``MALLOC_ARENA_MAX`` here wins).
ARENAS = os.environ.get("MALLOC_ARENA_MAX", "1")
_LINES = re.compile(r"^sglang_exporter_log_lines_total\{[^}]*\} (\S+)$", re.M)


def _status(pid: int) -> dict[str, float]:
    """``VmRSS`` and ``VmHWM`` of a process in MiB (``/proc/PID/status``)."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for row in f:
            key = row.split(":", 1)[0]
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(row.split()[1]) / 1024.0
    return out


def _get(url: str, accept: str | None = None) -> bytes:
    req = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(req, timeout=60) as r:
        return r.read()


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def measure(log: str, ranks: int, per_rank: int = 40, tp_tags: int = 1) -> dict:
    """One rank count's figures (see the module docstring); with ``tp_tags`` each line is printed
    by that many TP ranks (``TP0`` .. ``TP<tp_tags - 1>``: replicas of one scheduler)."""
    lines = _dp_lines(log, per_rank=per_rank, ranks=ranks, stamp=time.strftime("%Y-%m-%d %H:%M:%S"))
    if tp_tags > 1:
        lines = [re.sub(r" TP\d+\]", f" TP{t}]", ln, count=1) for ln in lines for t in range(tp_tags)]
    with tempfile.TemporaryDirectory(prefix="sglang-exporter-mem-") as work:
        path = os.path.join(work, "sglang.log")
        open(path, "w").close()
        port = _port()
        base = f"http://127.0.0.1:{port}"
        env = dict(os.environ, SGLANG_EXPORTER_GPU__ENABLED="false", MALLOC_ARENA_MAX=ARENAS)
        proc = subprocess.Popen([sys.executable, "-m", "exporter", "--log.path", path,
                                 "--web.listen-address", f"127.0.0.1:{port}"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    _get(base + "/healthz")
                    break
                except OSError:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError("exporter did not become healthy") from None
                    time.sleep(0.05)
            baseline = _status(proc.pid)["VmRSS"]
            with open(path, "a", encoding="utf-8") as f:
                f.write("\n".join(lines) + "\n")
            deadline = time.monotonic() + 300
            while sum(map(float, _LINES.findall(_get(base + "/metrics").decode()))) < len(lines):
                if time.monotonic() > deadline:
                    raise RuntimeError("lines not all counted within 300 s")
                time.sleep(0.2)
            for _ in range(3):
                body = _get(base + "/metrics")
            series = sum(1 for ln in body.split(b"\n") if ln and not ln.startswith(b"#"))
            text = _status(proc.pid)
            om = _get(base + "/metrics", PROMETHEUS_ACCEPT)
            after_om = _status(proc.pid)
        finally:
            proc.terminate()
            proc.wait(10)
    per = lambda st: round((st["VmHWM"] - baseline) * 1048576 / series)  # noqa: E731
    return {"dp_ranks": ranks, "tp_tags": tp_tags, "malloc_arena_max": ARENAS, "lines": len(lines), "series": series, "text_body_bytes": len(body),
            "openmetrics_body_bytes": len(om), "rss_mib_baseline": round(baseline, 1),
            "vmhwm_mib_after_text": round(text["VmHWM"], 1), "vmrss_mib_after_text": round(text["VmRSS"], 1),
            "vmhwm_mib_after_openmetrics": round(after_om["VmHWM"], 1),
            "vmrss_mib_after_openmetrics": round(after_om["VmRSS"], 1),
            "bytes_per_series_after_text": per(text), "bytes_per_series_after_openmetrics": per(after_om)}


def main() -> None:
    args = sys.argv[1:]
    tp = 1
    if "--tp-tags" in args:
        i = args.index("--tp-tags")
        tp = int(args[i + 1])
        del args[i:i + 2]
    log, *ranks = args
    print(json.dumps({str(r): measure(log, r, tp_tags=tp) for r in map(int, ranks or (8, 256))}))


if __name__ == "__main__":
    main()

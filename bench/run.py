#!/usr/bin/env python3
"""One-command benchmark of sglang-exporter, side by side with google/mtail, a naive Python loop and
a ``grep -c`` floor, all in one run.

    python3 bench/run.py                  # full run (about 7 minutes on 2 cores)
    python3 bench/run.py --lines 200000 --live-seconds 10    # quick look

Steps (all on this machine, loopback only, every loop bounded):

1. Build a log of ``--lines`` lines (default 2,000,000) from the real corpus ``tests/corpus``
   (``bench/genlog.py``: corpus lines by kind in realistic proportions, timestamps re-clocked); and
   where the test bed's recorded real SGLang 0.5.23 log is in the corpus, two more of as many lines
   from it (``build_real``): ``real-output`` (start-up once, its steady state repeated) and
   ``restarts`` (a start-up block every 100,000 lines), read one-shot by ours and mtail after the
   bench log.
2. One-shot throughput on that file: ``sglang-exporter --one-shot`` (read, parse, state, all
   metrics rendered; the bulk path on every usable core), ``mtail --one_shot`` with
   ``bench/mtail/sglang.mtail`` (Debian package ``mtail``, installed with apt-get when absent and we
   are root), ``bench/naive.py`` (the mtail program's regular expressions in a plain Python loop),
   and ``grep -c`` as the floor.
3. Live: the exporter follows a fresh file while lines are appended at ``--rate`` lines/s (200) for
   ``--live-seconds`` (60), scraped every 15 s like Prometheus: CPU share of one core and RSS of the
   process (``/proc``). Then, still at that rate, line-to-``/metrics`` delay: a line is written and
   ``/metrics`` is fetched back to back until its count shows it (p50, p99; the figure includes the
   last scrape, i.e. it is an upper bound). The ``fake-nvml`` configuration runs the same with NVML
   loaded: the C fake ``libnvidia-ml.so.1`` of ``tests/test_gpu_contract.py`` (compiled here with
   gcc against ``nvml.h`` of ``nvidia-nvml-dev``), the only NVML there is without a GPU.
4. ``/metrics`` render time at 8 and 64 DP ranks with 8 GPUs from the fake NVML backend
   (``bench/render.py``), in the text format and in OpenMetrics side by side: the client library's
   encoder of that format, and the command's renderer with nothing changed between scrapes and with
   every DP rank changed.
5. Memory of the served command at 8 and 256 DP ranks (``bench/memory.py``): ``VmHWM`` after text
   scrapes and after an OpenMetrics scrape, and the bytes per series above the idle RSS.

Prints a table with absolute figures and ratios and writes it as JSON (``--json``, default
``bench/results.json``). Speed is reported, never asserted: nothing here fails on a slow figure.

The script needs only Python 3.11+. Without an interpreter that can import the project it creates
``bench/.venv`` and installs the checkout into it (``pip install -e .``), then re-runs itself there.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
VENV = BENCH / ".venv"
TARGETS = {
    "lines_per_s_vs_mtail": 10.0,   # at least 10x mtail's lines/s on the same file
    "real-output_vs_mtail": 10.0,   # the same on the real server's output (issue 27, item 2)
    "restarts_vs_mtail": 5.0,       # and on it with a start-up block every 100,000 lines
    "rss_mb": 48.0,                 # steady-state RSS at most 48 MB (without NVML)
    "cpu_pct_of_core": 1.0,         # under 1% of a core at 200 lines/s
    "delay_p99_ms": 100.0,          # line-to-/metrics delay p99 under 100 ms
    "render_ms": 5.0,               # /metrics render under 5 ms (8 DP ranks, text and OpenMetrics)
    "container_mib": 256.0,         # the manifests' memory limit (docs/kubernetes.md: what the caps need)
}


# -- environment ------------------------------------------------------------------------------------

def _ensure_project_python() -> None:
    """Re-exec under an interpreter that can import the project (creating bench/.venv if needed)."""
    probe = "import exporter.cli, prometheus_client, watchdog"
    if os.environ.get("SGLANG_BENCH_CHILD") or subprocess.run(
            [sys.executable, "-c", probe], cwd=ROOT, capture_output=True).returncode == 0:
        return
    py = VENV / "bin" / "python"
    if not py.exists():
        print(f"creating {VENV} and installing the project into it ...", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    if subprocess.run([str(py), "-c", probe], cwd=ROOT, capture_output=True).returncode != 0:
        subprocess.run([str(py), "-m", "pip", "install", "-q", "-e", str(ROOT)], check=True)
    os.environ["SGLANG_BENCH_CHILD"] = "1"
    os.execv(str(py), [str(py), str(Path(__file__).resolve()), *sys.argv[1:]])


def _ensure_mtail() -> tuple[str | None, str]:
    """Path of mtail (installing Debian's package if absent and possible), and how it was found."""
    found = shutil.which("mtail")
    if found:
        return found, "found on PATH"
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        return None, "mtail not installed and apt-get unavailable (not root?): mtail column skipped"
    print("installing Debian package mtail ...", flush=True)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "mtail"]):
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            return None, f"{' '.join(cmd)} failed: {r.stderr.strip()[-200:]}"
    found = shutil.which("mtail")
    return found, "installed with apt-get" if found else "apt-get install mtail gave no mtail binary"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _version(cmd: list[str]) -> str:
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        return (r.stdout or r.stderr).strip().splitlines()[0]
    except (OSError, IndexError, subprocess.TimeoutExpired):
        return "unknown"


# -- one-shot ---------------------------------------------------------------------------------------

def _timed(cmd: list[str], stdout_path: Path, timeout: float, env: dict | None = None) -> dict:
    """Run ``cmd`` to completion; wall seconds, CPU seconds (user+sys) and peak RSS of the process."""
    with open(stdout_path, "wb") as out:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.PIPE, env=env)
        try:
            _, stderr = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            raise RuntimeError(f"{cmd[0]} ran past {timeout}s") from None
        wall = time.perf_counter() - t0
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"wall_s": wall, "rc": p.returncode, "stderr_tail": stderr.decode(errors="replace")[-400:],
            "ru": ru}


class _ChildCpu:
    """CPU and peak RSS of the next child only (RUSAGE_CHILDREN is cumulative)."""

    def __enter__(self):
        self.before = resource.getrusage(resource.RUSAGE_CHILDREN)
        return self

    def result(self, after) -> tuple[float, float]:
        cpu = (after.ru_utime - self.before.ru_utime) + (after.ru_stime - self.before.ru_stime)
        return cpu, after.ru_maxrss / 1024.0  # ru_maxrss: KiB on Linux; max over all children so far

    def __exit__(self, *exc):
        return False


def _one_shot(name: str, cmd: list[str], lines: int, work: Path, timeout: float) -> dict:
    with _ChildCpu() as c:
        r = _timed(cmd, work / f"{name}.out", timeout)
    cpu, _ = c.result(r["ru"])
    res = {"command": " ".join(cmd), "wall_s": round(r["wall_s"], 3), "cpu_s": round(cpu, 3),
           "lines_per_s": round(lines / r["wall_s"]), "lines_per_cpu_s": round(lines / cpu) if cpu else None,
           "rc": r["rc"]}
    if r["rc"] not in (0, 1) or (name != "grep" and r["rc"] != 0):
        res["error"] = r["stderr_tail"]
    return res


def _prom_sum(text: str, metric: str, label_filter: str = "") -> dict[str, float]:
    """Values of ``metric`` series whose label text contains ``label_filter``, keyed by label text."""
    out = {}
    for m in re.finditer(rf"^{metric}\{{([^}}]*)\}} (\S+)$", text, re.M):
        if label_filter in m.group(1):
            out[m.group(1)] = float(m.group(2))
    return out


def _agreement(work: Path, suffix: str = "") -> dict:
    """Lines of each kind that ours, mtail's program and the naive loop recognised in the one-shot
    outputs ``ours{suffix}.out`` etc. (a sanity check of the comparison: the peers read the same
    lines, ours more formats)."""
    ours = (work / f"ours{suffix}.out").read_text(errors="replace")
    res = {}
    theirs = (work / f"mtail{suffix}.out").read_text(errors="replace") if (work / f"mtail{suffix}.out").exists() else ""
    naive = (work / f"naive{suffix}.out").read_text(errors="replace") if (work / f"naive{suffix}.out").exists() else ""
    for kind in ("prefill", "decode", "retraction"):
        o = _prom_sum(ours, "sglang_exporter_log_lines_total", f'kind="{kind}",result="parsed"')
        t = _prom_sum(theirs, "sglang_exporter_log_lines_total", f'kind="{kind}"')
        n = _prom_sum(naive, "lines_total", f'kind="{kind}"')
        res[kind] = {"ours_parsed": int(sum(o.values())), "mtail_matched": int(sum(t.values())),
                     "naive_matched": int(sum(n.values()))}
    return res


# -- live -------------------------------------------------------------------------------------------

def _proc_cpu_rss(pid: int) -> tuple[float, float]:
    """(CPU seconds user+sys, RSS MiB) of a process, from /proc.

    ``utime + stime`` of ``/proc/PID/stat`` counts every thread, the HTTP request threads that have
    ended included; Linux derives it from the scheduler's exact run time, shown in 10 ms ticks, so
    a 60 s window resolves 0.02% of a core (the 10 s idle window 0.1%).
    """
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    rss = 0.0
    with open(f"/proc/{pid}/status") as f:
        for row in f:
            if row.startswith("VmRSS:"):
                rss = int(row.split()[1]) / 1024.0
    return cpu, rss


def _scrape(url: str) -> tuple[str, float]:
    t = time.perf_counter()
    with urllib.request.urlopen(url, timeout=5) as r:
        body = r.read().decode(errors="replace")
    return body, time.perf_counter() - t


def _lines_seen(body: str) -> float:
    return sum(_prom_sum(body, "sglang_exporter_log_lines_total").values())


def _wait_healthy(base: str, proc: subprocess.Popen, err: Path, timeout: float = 30.0) -> None:
    """Wait until ``base/healthz`` answers 200; raise with the tail of ``err`` if the process exits
    or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(base + "/healthz", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("exporter did not become healthy: " + err.read_text(errors="replace")[-400:])
        time.sleep(0.05)


class _Writer(threading.Thread):
    """Appends lines at a fixed rate (one write+flush per line, as a logger does) until stopped."""

    def __init__(self, path: Path, lines: list[str], rate: float, max_seconds: float):
        super().__init__(name="bench-writer", daemon=True)
        self.path, self.lines, self.rate, self.max_seconds = path, lines, rate, max_seconds
        self.written = 0
        self.stop_event = threading.Event()
        self.probe_request = threading.Event()
        self.probe_result: tuple[int, float] | None = None
        self.behind_max_s = 0.0

    def run(self) -> None:
        period = 1.0 / self.rate
        start = time.perf_counter()
        deadline = start + self.max_seconds
        with open(self.path, "a", encoding="utf-8") as f:
            i = 0
            while not self.stop_event.is_set() and time.perf_counter() < deadline:
                due = start + i * period
                now = time.perf_counter()
                if due > now:
                    time.sleep(due - now)
                else:
                    self.behind_max_s = max(self.behind_max_s, now - due)
                line = self.lines[i % len(self.lines)]
                probe = self.probe_request.is_set()
                t_write = time.perf_counter()
                f.write(line + "\n")
                f.flush()
                self.written += 1
                if probe:
                    self.probe_request.clear()
                    self.probe_result = (self.written, t_write)
                i += 1


#: Live configurations: the default (file events through watchdog, 1 s timer, appends read when a
#: scrape asks), the timer alone every 50 ms (the ``poll`` watch mode meant for NFS, here with a
#: short interval: a pass every 50 ms), and the default with NVML loaded (the fake library; see the
#: module docstring). Values are extra arguments; ``NVML`` is replaced by the fake library's path.
LIVE_CONFIGS = {
    "inotify": [],
    "poll50ms": ["--log.watch-mode", "poll", "--log.poll-interval", "0.05"],
    "fake-nvml": ["--gpu.enabled", "true", "--gpu.nvml-library-path", "NVML"],
}


def _fake_nvml(work: Path) -> tuple[str | None, str]:
    """The C fake libnvidia-ml of the contract tests, compiled here; ``(path, how)`` or ``(None, why)``."""
    gcc = shutil.which("gcc")
    header = next((h for entry in map(Path, sys.path) if entry.is_dir()
                   for h in sorted(entry.glob("nvidia/*/include/nvml.h"))), None)
    if gcc is None or header is None:
        return None, "gcc or nvml.h (pip install nvidia-nvml-dev) missing: fake-nvml configuration skipped"
    lib = work / "libnvidia-ml.so.1"
    r = subprocess.run([gcc, "-shared", "-fPIC", "-Wno-deprecated-declarations", f"-I{header.parent}",
                        "-Wl,-soname,libnvidia-ml.so.1", "-o", str(lib),
                        str(ROOT / "tests" / "fake_nvml" / "fake_nvml.c")], capture_output=True, text=True)
    if r.returncode != 0:
        return None, f"gcc failed: {r.stderr.strip()[-200:]}"
    return str(lib), "tests/fake_nvml/fake_nvml.c compiled with gcc (no GPU here)"


def _live(py: str, log_lines: list[str], work: Path, rate: float, seconds: float,
          delay_samples: int, extra: list[str], idle_seconds: float = 10.0) -> dict:
    path = work / "live.log"
    path.write_text("")
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    cmd = [py, "-m", "exporter", "--log.path", str(path), "--web.listen-address", f"127.0.0.1:{port}", *extra]
    env = dict(os.environ, SGLANG_EXPORTER_GPU__ENABLED="false")  # an argument in `extra` wins
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(work / "live.err", "wb"), env=env)
    try:
        _wait_healthy(base, proc, work / "live.err")
        # Idle: nothing written; what the timers and threads cost on their own.
        time.sleep(1.0)
        cpu_a, _ = _proc_cpu_rss(proc.pid)
        t_a = time.perf_counter()
        time.sleep(idle_seconds)
        cpu_b, rss_idle = _proc_cpu_rss(proc.pid)
        cpu_idle_pct = 100.0 * (cpu_b - cpu_a) / (time.perf_counter() - t_a)
        writer = _Writer(path, log_lines, rate, seconds + 120)
        writer.start()
        # Phase 1: steady state at `rate`, scraped every 15 s; the first 5 s are warm-up.
        time.sleep(min(5.0, seconds / 4))
        cpu0, _ = _proc_cpu_rss(proc.pid)
        t0 = time.perf_counter()
        w0 = writer.written
        rss_samples, scrape_ms = [], []
        next_scrape = t0
        while time.perf_counter() - t0 < seconds:
            if time.perf_counter() >= next_scrape:
                _, dt = _scrape(base + "/metrics")
                scrape_ms.append(dt * 1e3)
                next_scrape += 15.0
            rss_samples.append(_proc_cpu_rss(proc.pid)[1])
            time.sleep(1.0)
        cpu1, _ = _proc_cpu_rss(proc.pid)
        elapsed = time.perf_counter() - t0
        lines_in_phase = writer.written - w0
        # Phase 2: delay probes, the writer still appending at `rate`.
        delays = []
        probe_deadline = time.monotonic() + max(30.0, delay_samples * 0.2)
        while len(delays) < delay_samples and time.monotonic() < probe_deadline:
            writer.probe_result = None
            writer.probe_request.set()
            while writer.probe_result is None and time.monotonic() < probe_deadline:
                time.sleep(0.0005)
            if writer.probe_result is None:
                break
            k, t_write = writer.probe_result
            while time.monotonic() < probe_deadline:
                body, _ = _scrape(base + "/metrics")
                if _lines_seen(body) >= k:
                    delays.append((time.perf_counter() - t_write) * 1e3)
                    break
            time.sleep(0.03)  # let the exporter idle between probes, as between real scrapes
        writer.stop_event.set()
        writer.join(5)
        body, _ = _scrape(base + "/metrics")
        seen = _lines_seen(body)
        delays.sort()
        return {
            "command": " ".join(cmd[1:]),
            "cpu_pct_of_core_idle": round(cpu_idle_pct, 3),
            "rate_lines_per_s": rate,
            "seconds": round(elapsed, 1),
            "lines_written_in_phase": lines_in_phase,
            "cpu_pct_of_core": round(100.0 * (cpu1 - cpu0) / elapsed, 3),
            "rss_mb_idle": round(rss_idle, 1),
            "rss_mb_mean": round(statistics.fmean(rss_samples), 1) if rss_samples else None,
            "rss_mb_max": round(max(rss_samples), 1) if rss_samples else None,
            "scrape_ms_http": [round(x, 2) for x in scrape_ms],
            "delay_samples": len(delays),
            "delay_p50_ms": round(statistics.median(delays), 2) if delays else None,
            "delay_p99_ms": round(delays[min(len(delays) - 1, int(0.99 * len(delays)))], 2) if delays else None,
            "delay_max_ms": round(delays[-1], 2) if delays else None,
            "writer_max_lag_ms": round(writer.behind_max_s * 1e3, 2),
            "lines_written": writer.written,
            "lines_seen_by_exporter": int(seen),
        }
    finally:
        _stop(proc)


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL after 10 s."""
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


# -- report -----------------------------------------------------------------------------------------

def _ratio(a, b):
    return round(a / b, 2) if a and b else None


def _table(res: dict) -> str:
    os_ = res["one_shot"]
    ours, mt, gr, nv = os_.get("ours", {}), os_.get("mtail", {}), os_.get("grep", {}), os_.get("naive", {})
    render = res.get("render", {})
    t = TARGETS
    fmt = lambda v, spec="{:,.0f}": "n/a" if v is None else spec.format(v)  # noqa: E731
    rows = [
        ("one-shot lines/s, sglang-exporter", fmt(ours.get("lines_per_s")), ""),
        ("one-shot lines/s, mtail", fmt(mt.get("lines_per_s")), ""),
        ("one-shot lines/s, naive Python loop", fmt(nv.get("lines_per_s")), ""),
        ("one-shot lines/s, grep -c (floor)", fmt(gr.get("lines_per_s")), ""),
        ("ratio ours / mtail (lines/s)", fmt(res["ratios"].get("ours_vs_mtail_lines_per_s"), "{:.2f}x"),
         f">= {t['lines_per_s_vs_mtail']:.0f}x"),
        ("ratio ours / mtail (lines per CPU-s)", fmt(res["ratios"].get("ours_vs_mtail_lines_per_cpu_s"), "{:.2f}x"), ""),
        ("ratio ours / naive Python (lines/s)", fmt(res["ratios"].get("ours_vs_naive_lines_per_s"), "{:.2f}x"), ""),
        ("ratio ours / grep (lines/s)", fmt(res["ratios"].get("ours_vs_grep_lines_per_s"), "{:.3f}x"), ""),
    ]
    for kind, real in res.get("one_shot_real", {}).items():
        rows += [
            (f"one-shot lines/s, {kind} log: sglang-exporter / mtail",
             f"{fmt(real.get('ours', {}).get('lines_per_s'))} / {fmt(real.get('mtail', {}).get('lines_per_s'))}", ""),
            (f"ratio ours / mtail (lines/s), {kind} log", fmt(real.get("ours_vs_mtail_lines_per_s"), "{:.2f}x"),
             f">= {t[kind + '_vs_mtail']:.0f}x"),
            (f"ratio ours / mtail (lines per CPU-s), {kind} log",
             fmt(real.get("ours_vs_mtail_lines_per_cpu_s"), "{:.2f}x"), ""),
        ]
    for name, live in res.get("live", {}).items():
        rate = live.get("rate_lines_per_s", 0)
        rows += [
            (f"live [{name}] RSS MB (mean / max) at {rate:.0f} lines/s",
             f"{fmt(live.get('rss_mb_mean'), '{:.1f}')} / {fmt(live.get('rss_mb_max'), '{:.1f}')}",
             f"< {t['rss_mb']:.0f}"),
            (f"live [{name}] CPU % of one core at {rate:.0f} lines/s", fmt(live.get("cpu_pct_of_core"), "{:.2f}"),
             f"< {t['cpu_pct_of_core']:.0f}"),
            (f"live [{name}] CPU % of one core, idle", fmt(live.get("cpu_pct_of_core_idle"), "{:.2f}"), ""),
            (f"live [{name}] line-to-/metrics delay p50 ms", fmt(live.get("delay_p50_ms"), "{:.1f}"), ""),
            (f"live [{name}] line-to-/metrics delay p99 ms", fmt(live.get("delay_p99_ms"), "{:.1f}"),
             f"< {t['delay_p99_ms']:.0f}"),
        ]
    for ranks in ("8", "64"):
        by_rank = render.get(ranks, {})
        for fmt_name in ("text", "openmetrics"):
            rr = by_rank.get(fmt_name, {})
            scale = f"{ranks} DP ranks, {by_rank.get('gpus', '?')} GPUs, {rr.get('series', '?')} series, {fmt_name}"
            pair = lambda k: f"{fmt(rr.get(k + '_p50_ms'), '{:.2f}')} / {fmt(rr.get(k + '_p99_ms'), '{:.2f}')}"  # noqa: E731
            target = f"p50 < {t['render_ms']:.0f}" if ranks == "8" else ""
            rows += [
                (f"/metrics render p50 / p99 ms, library encoder ({scale})", pair("library"), ""),
                (f"/metrics render p50 / p99 ms, renderer, every DP rank changed ({scale})", pair("changed"), target),
                (f"/metrics render p50 / p99 ms, renderer, nothing changed ({scale})", pair("unchanged"), target),
            ]
    for ranks, m in res.get("memory", {}).items():
        if not isinstance(m, dict) or "series" not in m:
            continue
        rows += [
            (f"RSS MiB (VmHWM) after text scrapes / then OpenMetrics, {ranks} DP ranks, {m['series']:,} series",
             f"{m['vmhwm_mib_after_text']:.1f} / {m['vmhwm_mib_after_openmetrics']:.1f}",
             f"< {t['container_mib']:.0f}"),
            (f"bytes per series (VmHWM above the idle RSS), text / then OpenMetrics, {ranks} DP ranks",
             f"{m['bytes_per_series_after_text']} / {m['bytes_per_series_after_openmetrics']}", ""),
        ]
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows)
    out = [f"| {'measure'.ljust(w0)} | {'value'.rjust(w1)} | target |", f"|{'-' * (w0 + 2)}|{'-' * (w1 + 1)}:|---|"]
    out += [f"| {a.ljust(w0)} | {b.rjust(w1)} | {c} |" for a, b, c in rows]
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lines", type=int, default=2_000_000, help="lines in the generated log (default 2,000,000)")
    ap.add_argument("--corpus", default=str(ROOT / "tests" / "corpus"), help="directory of *.log")
    ap.add_argument("--rate", type=float, default=200.0, help="live append rate, lines/s (default 200)")
    ap.add_argument("--live-seconds", type=float, default=60.0, help="live measuring window (default 60)")
    ap.add_argument("--delay-samples", type=int, default=300, help="line-to-/metrics probes (default 300)")
    ap.add_argument("--live-configs", default=",".join(LIVE_CONFIGS),
                    help=f"comma-separated live configurations among {', '.join(LIVE_CONFIGS)}")
    ap.add_argument("--skip-mtail", action="store_true", help="do not run (or install) mtail")
    ap.add_argument("--skip-live", action="store_true", help="one-shot and render only (no live step)")
    ap.add_argument("--json", default=str(BENCH / "results.json"), help="where to write the results")
    ap.add_argument("--workdir", help="keep the generated files here (default: a temporary directory)")
    args = ap.parse_args()
    _ensure_project_python()
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(BENCH))
    import genlog  # noqa: PLC0415 - after the interpreter is settled

    py = sys.executable
    tmp = None
    if args.workdir:
        work = Path(args.workdir)
        work.mkdir(parents=True, exist_ok=True)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="sglang-exporter-bench-")
        work = Path(tmp.name)
    started = time.time()
    try:
        res: dict = {"machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                                 "platform": platform.platform(), "cpu": _cpu_model()},
                     "targets": TARGETS}
        log = work / "bench.log"
        print(f"[1/5] building {args.lines:,} lines from {args.corpus} ...", flush=True)
        res["log"] = genlog.build(str(log), args.lines, args.corpus)
        res["log"]["proportions"] = genlog.PROPORTIONS
        n = args.lines
        print("[2/5] one-shot: grep, sglang-exporter, mtail ...", flush=True)
        one: dict = {}
        one["grep"] = _one_shot("grep", ["grep", "-c", "batch", str(log)], n, work, 600)
        one["ours"] = _one_shot("ours", [py, "-m", "exporter", "--log.path", str(log), "--one-shot"], n, work, 900)
        one["naive"] = _one_shot("naive", [py, str(BENCH / "naive.py"), str(log)], n, work, 1200)
        mtail, how = (None, "skipped (--skip-mtail)") if args.skip_mtail else _ensure_mtail()
        res["mtail"] = {"found": how}
        if mtail:
            res["mtail"]["version"] = _version([mtail, "--version"])
            progs = work / "mtail-progs"
            progs.mkdir(exist_ok=True)
            shutil.copy(BENCH / "mtail" / "sglang.mtail", progs / "sglang.mtail")
            one["mtail"] = _one_shot("mtail", [mtail, "--progs", str(progs), "--logs", str(log), "--one_shot",
                                               "--one_shot_format", "prometheus", "--address", "127.0.0.1",
                                               "--port", str(_free_port()), "--logtostderr=false",
                                               "--stderrthreshold", "ERROR"], n, work, 1200)
        res["one_shot"] = one
        res["agreement"] = _agreement(work)
        res["one_shot_real"] = {}
        for kind in ("real-output", "restarts"):  # one real server's output (bench/genlog.py build_real)
            if not os.path.exists(genlog.DEFAULT_REAL):
                break
            path = work / f"{kind}.log"
            real = {"log": genlog.build_real(str(path), n, kind)}
            real["ours"] = _one_shot(f"ours-{kind}", [py, "-m", "exporter", "--log.path", str(path), "--one-shot"],
                                     n, work, 900)
            if mtail:
                real["mtail"] = _one_shot(f"mtail-{kind}", [
                    mtail, "--progs", str(work / "mtail-progs"), "--logs", str(path), "--one_shot",
                    "--one_shot_format", "prometheus", "--address", "127.0.0.1", "--port", str(_free_port()),
                    "--logtostderr=false", "--stderrthreshold", "ERROR"], n, work, 1200)
                real["ours_vs_mtail_lines_per_s"] = _ratio(real["ours"]["lines_per_s"], real["mtail"]["lines_per_s"])
                real["ours_vs_mtail_lines_per_cpu_s"] = _ratio(real["ours"]["lines_per_cpu_s"],
                                                               real["mtail"]["lines_per_cpu_s"])
            real["agreement"] = _agreement(work, f"-{kind}")
            res["one_shot_real"][kind] = real
        r = res["ratios"] = {}
        if "mtail" in one:
            r["ours_vs_mtail_lines_per_s"] = _ratio(one["ours"]["lines_per_s"], one["mtail"]["lines_per_s"])
            r["ours_vs_mtail_lines_per_cpu_s"] = _ratio(one["ours"]["lines_per_cpu_s"], one["mtail"]["lines_per_cpu_s"])
        r["ours_vs_naive_lines_per_s"] = _ratio(one["ours"]["lines_per_s"], one["naive"]["lines_per_s"])
        r["ours_vs_grep_lines_per_s"] = round(one["ours"]["lines_per_s"] / one["grep"]["lines_per_s"], 4)
        print(f"[3/5] live: {args.rate:.0f} lines/s for {args.live_seconds:.0f} s, then delay probes ...", flush=True)
        if args.skip_live:
            args.live_configs = ""
        with open(log, encoding="utf-8") as f:
            live_lines = [next(f).rstrip("\n") for _ in range(min(n, 50_000))]
        res["live"] = {}
        nvml, nvml_how = _fake_nvml(work) if "fake-nvml" in args.live_configs else (None, "not asked")
        res["nvml"] = nvml_how
        for name in filter(None, args.live_configs.split(",")):
            extra = [nvml if a == "NVML" else a for a in LIVE_CONFIGS[name]]
            if "NVML" in LIVE_CONFIGS[name] and nvml is None:
                print(f"      live config {name} skipped: {nvml_how}", flush=True)
                continue
            print(f"      live config {name} ...", flush=True)
            res["live"][name] = _live(py, live_lines, work, args.rate, args.live_seconds, args.delay_samples, extra)
        print("[4/5] /metrics render at 8 and 64 DP ranks with 8 GPUs, text and OpenMetrics ...", flush=True)
        rr = subprocess.run([py, str(BENCH / "render.py"), str(log), "300"], capture_output=True, text=True,
                            timeout=900, cwd=ROOT)
        res["render"] = json.loads(rr.stdout) if rr.returncode == 0 else {"error": rr.stderr[-400:]}
        print("[5/5] memory of the served command at 8 and 256 DP ranks ...", flush=True)
        mr = subprocess.run([py, str(BENCH / "memory.py"), str(log), "8", "256"], capture_output=True, text=True,
                            timeout=900, cwd=ROOT)
        res["memory"] = json.loads(mr.stdout) if mr.returncode == 0 else {"error": mr.stderr[-400:]}
        res["total_seconds"] = round(time.time() - started, 1)
        res["table"] = _table(res)
        # The results file is committed: no path of the machine that ran it goes in.
        text = (json.dumps(res, indent=2).replace(str(work), "<workdir>").replace(py, "python")
                .replace(str(ROOT) + os.sep, ""))
        Path(args.json).write_text(text + "\n")
        print()
        print(res["table"])
        print(f"\nline kinds recognised (ours parsed / mtail matched): {res['agreement']}")
        for kind, real in res["one_shot_real"].items():
            print(f"the same, {kind} log: {real['agreement']}")
        print(f"written to {args.json}; {res['total_seconds']:.0f} s in all")
        return 0
    finally:
        if tmp is not None:
            tmp.cleanup()


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for row in f:
                if row.startswith("model name"):
                    return row.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


if __name__ == "__main__":
    sys.exit(main())

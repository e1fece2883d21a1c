"""Time the ``/metrics`` render at 8 and 64 DP ranks with 8 GPUs, in the text format and in
OpenMetrics (what Prometheus negotiates first), side by side: prometheus_client's encoder of that
format over the command's registry (``generate_latest`` of ``prometheus_client`` and of
``prometheus_client.openmetrics.exposition``), and the command's renderer (``exporter/exposition.py``)
with nothing changed between scrapes and with every DP rank changed (one more stats line per rank
before each scrape). The renderer is timed after ``gc.collect()`` and ``gc.freeze()``, as the served
command runs once start-up is done; the body is compared with the library's after the changes.

Run by ``bench/run.py`` with the project's interpreter; prints one JSON object keyed by DP ranks, then
format (``text``, ``openmetrics``). The scheduler state is filled by feeding the bench log's
Prefill/Decode/retraction lines re-tagged ``DP<d> TP<d mod 8>`` for each rank through the real ingest
step; the GPUs come from the fake NVML backend of ``tests/gpu_fake.py`` (8 H100s) through the real
``GpuPoller``/``GpuCollector``. Where that backend is not importable the render is timed with the DP
ranks only and ``gpus`` says 0. The library's encoder runs fewer times at 64 ranks (it takes
hundreds of ms there); ``iterations`` gives each count.

Usage: ``python bench/render.py LOG [ITERATIONS] [--ranks 8,64] [--json PATH]`` (``--json`` also
writes the result there, with the machine).
"""

from __future__ import annotations

import gc
import inspect
import json
import os
import platform
import re
import sys
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(_HERE)
_PREFIX = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)[^\]]*\] ")


def _dp_lines(log: str, per_rank: int = 5000, ranks: int = 8, stamp: str | None = None) -> list[str]:
    """Stats lines of the bench log, re-tagged for DP ranks ``0..ranks-1`` (``per_rank`` lines each,
    interleaved: line i of every rank, then line i + 1); the prefix's date-time is the log's last
    one, or ``stamp`` (``YYYY-MM-DD HH:MM:SS``)."""
    base: list[str] = []
    with open(log, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = _PREFIX.match(line)
            if m and ("Decode batch" in line or "Prefill batch" in line or "Retract" in line):
                base.append(line[m.end():].rstrip("\n"))
                last = m.group(1)
                if len(base) >= per_rank:
                    break
    stamp = stamp or last
    out = []
    for body in base:
        for d in range(ranks):
            out.append(f"[{stamp} DP{d} TP{d % 8}] {body}")
    return out


def _gpu_collector():
    """(collector, poller, how) with 8 fake GPUs, or (None, None, reason) without the fake backend."""
    sys.path.insert(0, os.path.join(_ROOT, "tests"))
    try:
        from gpu_fake import FakeGpu, FakeNvml  # noqa: PLC0415 - optional, test helper

        from exporter.sources.gpu.collector import GpuCollector  # noqa: PLC0415
        from exporter.sources.gpu.poller import GpuPoller  # noqa: PLC0415
    except Exception as exc:  # noqa: BLE001 - the GPU collector may not have landed
        return None, None, f"fake NVML backend unavailable ({type(exc).__name__}: {exc})"
    nv = FakeNvml([FakeGpu(f"GPU-{i:08x}-0000-0000-0000-{i:012x}") for i in range(8)])
    poller = GpuPoller(lambda: nv, xid_events=False, poll_interval=3600.0)
    poller.run_cycle()  # init + one reading of every device, synchronously
    return GpuCollector(poller), poller, "tests/gpu_fake.py FakeNvml, 8 x FakeGpu"


def _p(times: list[float], q: float) -> float:
    times = sorted(times)
    return 1e3 * times[min(len(times) - 1, int(q * len(times)))]


#: Accept headers: the text format (no header, as curl) and Prometheus' first choice.
FORMATS = {"text": None, "openmetrics": "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"}
_VOLATILE = re.compile(rb"^(sglang_exporter_collector_duration_seconds|sglang_gpu_snapshot_age_seconds).*\n", re.M)


def measure(log: str, ranks: int, iterations: int, gpu_collector) -> dict:
    """One rank count's render figures, both formats (see the module docstring)."""
    from prometheus_client.exposition import choose_encoder  # noqa: PLC0415

    from exporter.cli import build_registry  # noqa: PLC0415
    from exporter.exposition import Renderer  # noqa: PLC0415
    from exporter.scheduler.state import SchedulerStates  # noqa: PLC0415
    from exporter.scheduler.store import SchedulerStore  # noqa: PLC0415
    from exporter.sources.log.source import LogSource  # noqa: PLC0415

    store = SchedulerStore(SchedulerStates())
    log_source = LogSource([], store)
    lines = _dp_lines(log, per_rank=max(50, 40_000 // ranks), ranks=ranks)
    half = len(lines) // 2 // ranks * ranks
    for i in range(0, half, 4096):
        log_source.ingest.feed(lines[i:min(i + 4096, half)])
    rest = lines[half:]
    kw = {"gpu": gpu_collector} if gpu_collector is not None else {}
    registry = build_registry(store, log_source, 3600.0, **kw)
    lib_runs = max(5, iterations // (ranks // 8) ** 2)
    out: dict = {"dp_ranks": len(store.states.schedulers)}
    at = 0
    for name, accept in FORMATS.items():
        encoder, content_type = choose_encoder(accept or "")
        body = encoder(registry)
        library = []
        for _ in range(lib_runs):
            t = time.perf_counter()
            encoder(registry)
            library.append(time.perf_counter() - t)
        renderer = Renderer(registry)
        renderer.render(accept)
        gc.collect()
        gc.freeze()
        unchanged, changed = [], []
        for _ in range(iterations):
            t = time.perf_counter()
            renderer.render(accept)
            unchanged.append(time.perf_counter() - t)
        for _ in range(iterations):
            log_source.ingest.feed(rest[at:at + ranks])
            at = (at + ranks) % max(ranks, len(rest) - ranks)
            t = time.perf_counter()
            renderer.render(accept)
            changed.append(time.perf_counter() - t)
        gc.unfreeze()
        busy = renderer.render(accept)[0]
        text = body.decode()
        out[name] = {
            "content_type": content_type,
            "series": sum(1 for ln in text.splitlines() if ln and not ln.startswith("#")),
            "bytes": len(body),
            "iterations": {"library": lib_runs, "renderer": iterations},
            "library_p50_ms": _p(library, 0.5),
            "library_p99_ms": _p(library, 0.99),
            "unchanged_p50_ms": _p(unchanged, 0.5),
            "unchanged_p99_ms": _p(unchanged, 0.99),
            "changed_p50_ms": _p(changed, 0.5),
            "changed_p99_ms": _p(changed, 0.99),
            "library_over_changed_p50": round(_p(library, 0.5) / _p(changed, 0.5), 1),
            "renderer_equals_library_after_changes": _VOLATILE.sub(b"", busy) == _VOLATILE.sub(b"", encoder(registry)),
        }
        gpus = len(set(re.findall(r'sglang_gpu_\w+\{[^}]*uuid="([^"]+)"', text)))
    out["gpus"] = gpus
    return out


def main() -> None:
    args = sys.argv[1:]
    out = None
    ranks = [8, 64]
    if "--json" in args:
        i = args.index("--json")
        out = args[i + 1]
        del args[i:i + 2]
    if "--ranks" in args:
        i = args.index("--ranks")
        ranks = [int(r) for r in args[i + 1].split(",")]
        del args[i:i + 2]
    load_start = os.getloadavg()[0]
    log = args[0]
    iterations = int(args[1]) if len(args) > 1 else 300
    import exporter.cli  # noqa: PLC0415

    gpu, poller, how = _gpu_collector()
    if gpu is not None and "gpu" not in inspect.signature(exporter.cli.build_registry).parameters:
        how = "build_registry() takes no gpu collector; rendered without GPUs"
        gpu = None
    result = {"gpu_backend": how}
    try:
        for r in ranks:
            result[str(r)] = measure(log, r, iterations, gpu)
    finally:
        if poller is not None:
            poller.stop(timeout=2)
    print(json.dumps(result))
    if out:
        machine = {"python": platform.python_version(), "cpus": os.cpu_count(),
                   "load_1min_start": load_start, "load_1min_end": os.getloadavg()[0]}
        with open(out, "w", encoding="utf-8") as f:
            json.dump({"machine": machine, "log": os.path.basename(log), "render": result}, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()

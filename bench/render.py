"""Time the ``/metrics`` render with 8 DP ranks and 8 GPUs: prometheus_client's ``generate_latest``
of the command's registry, and the command's renderer (``exporter/exposition.py``) with nothing
changed between scrapes and with every DP rank changed; the last both with the text fast path
(``exporter/metrics/text.py``) and then without it (``Renderer(fast_text=False)``: the renderer before
it), in the same run; then with the text fast path again after ``gc.collect()`` and ``gc.freeze()``,
as the served command does once start-up is done (``changed_gc_frozen_*``).

Run by ``bench/run.py`` with the project's interpreter; prints one JSON object. The scheduler state is
filled by feeding the bench log's Prefill/Decode/retraction lines re-tagged ``DP<d> TP<d>`` for
d = 0..7 through the real ingest step; the GPUs come from the fake NVML backend of ``tests/gpu_fake.py``
(8 H100s) through the real ``GpuPoller``/``GpuCollector``. Where that backend is not importable the
render is timed with the 8 DP ranks only and ``gpus`` says 0.

Usage: ``python bench/render.py LOG [ITERATIONS] [--json PATH]`` (``--json`` also writes the result
there, with the machine).
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


def main() -> None:
    args = sys.argv[1:]
    out = None
    if "--json" in args:
        i = args.index("--json")
        out = args[i + 1]
        del args[i:i + 2]
    load_start = os.getloadavg()[0]
    log = args[0]
    iterations = int(args[1]) if len(args) > 1 else 300
    from prometheus_client import generate_latest  # noqa: PLC0415

    from exporter.cli import build_registry  # noqa: PLC0415
    from exporter.exposition import Renderer  # noqa: PLC0415
    from exporter.scheduler.state import SchedulerStates  # noqa: PLC0415
    from exporter.scheduler.store import SchedulerStore  # noqa: PLC0415
    from exporter.sources.log.source import LogSource  # noqa: PLC0415

    store = SchedulerStore(SchedulerStates())
    log_source = LogSource([], store)
    lines = _dp_lines(log)
    for i in range(0, len(lines), 4096):
        log_source.ingest.feed(lines[i:i + 4096])
    gpu, poller, how = _gpu_collector()
    kw = {}
    if gpu is not None and "gpu" in inspect.signature(build_registry).parameters:
        kw["gpu"] = gpu
    elif gpu is not None:
        how = "build_registry() takes no gpu collector; rendered without GPUs"
        gpu = None
    registry = build_registry(store, log_source, 3600.0, **kw)
    body = generate_latest(registry)
    # 1. prometheus_client's generate_latest over the whole registry, as before the render cache
    library = []
    for _ in range(iterations):
        t = time.perf_counter()
        generate_latest(registry)
        library.append(time.perf_counter() - t)
    collect = []  # the collectors alone (state snapshot -> metric families), without text encoding
    for _ in range(iterations):
        t = time.perf_counter()
        for _family in registry.collect():
            pass
        collect.append(time.perf_counter() - t)
    # 2. the /metrics renderer, nothing changed between scrapes (an idle server, concurrent scrapes)
    renderer = Renderer(registry)
    same_body, _ = renderer.render()
    unchanged = []
    for _ in range(iterations):
        t = time.perf_counter()
        renderer.render()
        unchanged.append(time.perf_counter() - t)
    # 3. the /metrics renderer, every DP rank printed one more line between scrapes (a busy server),
    #    with the text fast path, then without it (the renderer before it) on the next lines
    before = Renderer(registry, fast_text=False)
    changed, changed_before = [], []
    for r, times in ((renderer, changed), (before, changed_before)):
        r.render()
        for i in range(iterations):
            at = (8 * (i + iterations * (r is before))) % len(lines)
            log_source.ingest.feed(lines[at:at + 8])
            t = time.perf_counter()
            r.render()
            times.append(time.perf_counter() - t)
    # 4. as 3 with the fast path, after gc.collect() and gc.freeze() as the served command does once
    #    start-up is done (cli._serve): the garbage collector's full collections skip what lived then
    gc.collect()
    gc.freeze()
    frozen: list[float] = []
    renderer.render()
    for i in range(iterations):
        at = (8 * (i + 2 * iterations)) % len(lines)
        log_source.ingest.feed(lines[at:at + 8])
        t = time.perf_counter()
        renderer.render()
        frozen.append(time.perf_counter() - t)
    gc.unfreeze()
    busy_body, busy_library = renderer.render()[0], generate_latest(registry)
    if poller is not None:
        poller.stop(timeout=2)
    text = body.decode()
    gpus = len({m for m in re.findall(r'sglang_gpu_\w+\{[^}]*uuid="([^"]+)"', text)})
    volatile = re.compile(rb"^(sglang_exporter_collector_duration_seconds|sglang_gpu_snapshot_age_seconds).*\n", re.M)
    result = {
        "dp_ranks": len(store.states.schedulers),
        "gpus": gpus,
        "gpu_backend": how,
        "series": sum(1 for ln in text.splitlines() if ln and not ln.startswith("#")),
        "bytes": len(body),
        "iterations": iterations,
        "library_p50_ms": _p(library, 0.5),
        "library_p99_ms": _p(library, 0.99),
        "collect_p50_ms": _p(collect, 0.5),
        "unchanged_p50_ms": _p(unchanged, 0.5),
        "unchanged_p99_ms": _p(unchanged, 0.99),
        "changed_p50_ms": _p(changed, 0.5),
        "changed_p99_ms": _p(changed, 0.99),
        "changed_without_fast_text_p50_ms": _p(changed_before, 0.5),
        "changed_without_fast_text_p99_ms": _p(changed_before, 0.99),
        "changed_gc_frozen_p50_ms": _p(frozen, 0.5),
        "changed_gc_frozen_p99_ms": _p(frozen, 0.99),
        "p50_ms": _p(unchanged, 0.5),
        "p99_ms": _p(unchanged, 0.99),
        "renderer_equals_library": volatile.sub(b"", same_body) == volatile.sub(b"", body),
        "renderer_equals_library_after_changes": volatile.sub(b"", busy_body) == volatile.sub(b"", busy_library),
    }
    print(json.dumps(result))
    if out:
        machine = {"python": platform.python_version(), "cpus": os.cpu_count(),
                   "load_1min_start": load_start, "load_1min_end": os.getloadavg()[0]}
        with open(out, "w", encoding="utf-8") as f:
            json.dump({"machine": machine, "log": os.path.basename(log), "render": result}, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()

"""SGLang / GPU: the NVML readings of the GPUs the SGLang server runs on (``sglang_gpu_*``)."""

from __future__ import annotations

from ..config import Config
from ..promql import percent
from .panels import Scope, dashboard, graph, grid, row, single


def build(cfg: Config):
    g = Scope.gpu()
    leg = g.legend
    pod = 'namespace=~"$namespace", pod=~"$pod"'
    near_full = cfg.alerts["SGLangGPUMemoryNearFull"].threshold
    b = dashboard(cfg, "gpu", "SGLang / GPU", "The NVML readings of the GPUs the SGLang server runs on.")

    b = b.with_row(row("Health"))
    b = b.with_panel(single(
        "NVML up", "1 when the GPU collector reads NVML and its latest snapshot is fresh (sglang_gpu_up).",
        "none", [(f"sglang_gpu_up{{{pod}}}", "{{pod}}")], thresholds=[(1, "green")], base="red", background=True))
    b = b.with_panel(graph(
        "Snapshot age", "Seconds since the poller's latest complete NVML snapshot.",
        "s", [(f"sglang_gpu_snapshot_age_seconds{{{pod}}}", "{{pod}}")], w=6, lo=0))
    b = b.with_panel(grid(
        "GPUs", "Identity of each GPU: name, UUID, driver and CUDA versions, MIG mode (sglang_gpu_info).",
        (g.of("sglang_gpu_info"), "")))

    b = b.with_row(row("Utilisation and memory"))
    b = b.with_panel(graph(
        "GPU utilisation", "Share of the sample period in which a kernel ran (NVML utilization.gpu).",
        "percentunit", [(g.of("sglang_gpu_utilization_ratio"), leg)], lo=0, hi=1))
    b = b.with_panel(graph(
        "Memory bandwidth utilisation", "Share of the sample period in which device memory was read or written.",
        "percentunit", [(g.of("sglang_gpu_memory_utilization_ratio"), leg)], lo=0, hi=1))
    b = b.with_panel(graph(
        "Device memory", "Used, reserved and total device memory. SGLang reserves --mem-fraction-static (weights "
        "and KV pool) at start-up, so ~90% used is normal.",
        "bytes", [(g.of("sglang_gpu_memory_used_bytes"), f"used {leg}"),
                  (g.of("sglang_gpu_memory_reserved_bytes"), f"reserved {leg}"),
                  (g.of("sglang_gpu_memory_total_bytes"), f"total {leg}")], lo=0))
    b = b.with_panel(graph(
        "Memory used share", f"1 - free / total (SGLangGPUMemoryNearFull above {percent(near_full)}).",
        "percentunit", [(f"1 - {g.of('sglang_gpu_memory_free_bytes')} / {g.of('sglang_gpu_memory_total_bytes')}", leg)],
        lo=0, hi=1, thresholds=[(near_full, "red")]))
    b = b.with_panel(graph(
        "Process memory", "Device memory used by the compute processes on each GPU.",
        "bytes", [(g.of("sglang_gpu_process_memory_used_bytes"), leg)], lo=0))
    b = b.with_panel(graph(
        "Compute processes", "Number of compute processes on each GPU (SGLang: one per TP rank on it).",
        "none", [(g.of("sglang_gpu_processes"), leg)], lo=0))

    b = b.with_row(row("Clocks, power, temperature"))
    b = b.with_panel(graph(
        "Clocks", "SM and memory clocks.", "hertz",
        [(g.of("sglang_gpu_sm_clock_hertz"), f"SM {leg}"), (g.of("sglang_gpu_memory_clock_hertz"), f"memory {leg}")],
        lo=0))
    b = b.with_panel(graph(
        "Clocks-event (throttle) reasons", "Reasons currently lowering the clocks (1 = active); thermal and hardware "
        "reasons fire SGLangGPUThrottled, sw_power_cap SGLangGPUPowerCapped. gpu_idle is excluded.",
        "none", [(g.of("sglang_gpu_clocks_event_active", 'reason!="gpu_idle"') + " > 0", "{{reason}} " + leg)],
        lo=0, hi=1))
    b = b.with_panel(graph(
        "Power", "Power draw and the enforced limit; the mean power from the energy counter.",
        "watt", [(g.of("sglang_gpu_power_watts"), f"draw {leg}"), (g.of("sglang_gpu_power_limit_watts"), f"limit {leg}"),
                 (f"rate({g.of('sglang_gpu_energy_joules_total')}[$__rate_interval])", f"mean {leg}")], lo=0))
    b = b.with_panel(graph(
        "Temperature", "GPU die temperature (NVML); sustained heat ends in thermal slowdown (see the throttle reasons).",
        "celsius", [(g.of("sglang_gpu_temperature_celsius"), leg)]))

    b = b.with_row(row("Errors"))
    b = b.with_panel(graph(
        "XID errors", "XID events reported by the driver in the interval, by XID code (SGLangGPUXidErrors).",
        "short", [(f"sum by (namespace, pod, gpu, xid) (increase({g.of('sglang_gpu_xid_errors_total')}[$__rate_interval]))",
                   "XID {{xid}} " + leg)], lo=0))
    b = b.with_panel(graph(
        "ECC errors and remapped rows", "Volatile ECC errors by type in the interval, and remapped rows by kind "
        "(pending/failure fire SGLangGPUMemoryErrors).",
        "short", [(f"increase({g.of('sglang_gpu_ecc_errors_total')}[$__rate_interval])", "ECC {{error_type}} " + leg),
                  (g.of("sglang_gpu_remapped_rows"), "rows {{kind}} " + leg)], lo=0))
    b = b.with_panel(graph(
        "NVML call errors", "Failed NVML calls per second by function and error kind.",
        "ops", [(f"sum by (pod, call, kind) (rate(sglang_gpu_nvml_errors_total{{{pod}}}[$__rate_interval]))",
                 "{{call}} {{kind}} {{pod}}")], lo=0))
    b = b.with_panel(graph(
        "NVML init errors", "1 while NVML cannot be initialised, by error kind (SGLangGPUNVMLDown names it).",
        "none", [(f"sglang_gpu_init_error{{{pod}}} > 0", "init {{kind}} {{pod}}")], lo=0, hi=1))
    return b

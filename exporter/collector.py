"""Collectors: turn a snapshot of the pipeline into Prometheus metric families at scrape time.

Every family's HELP names the log line and field it comes from. All scheduler metrics carry the
label ``dp_rank``. The README's metric table lists the same names; ``tests/test_metrics_doc.py``
keeps the two in step.
"""

from __future__ import annotations

import logging
import platform
import time
from collections.abc import Callable, Iterator

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from . import __version__
from .pipeline import Pipeline
from .scheduler.state import SchedulerState, SchedulerStates

log = logging.getLogger(__name__)

# (metric name, ReplicaCounters attribute, HELP) for plain per-scheduler counters.
_COUNTERS = (
    ("sglang_scheduler_retractions_total", "retractions",
     "Retraction events (one per 'KV cache pool is full. Retract requests.' / 'Decode out of memory "
     "happened' line of the scheduler, counted once across its TP/PP replicas)."),
    ("sglang_scheduler_retracted_requests_total", "retracted_requests",
     "Requests retracted (sum of #retracted_reqs of retraction lines)."),
    ("sglang_scheduler_retract_aborted_requests_total", "retract_aborts",
     "Requests aborted because even alone they did not fit ('retract_decode: aborted last request ... "
     "due to OOM', 2026-03+)."),
    ("sglang_scheduler_retraction_freed_tokens_total", "retraction_freed_tokens",
     "KV tokens freed by retractions (sum of #new_tokens_gained of retraction lines, 2025-12-24+)."),
    ("sglang_scheduler_prefill_computed_tokens_total", "prefill_computed_tokens",
     "Prompt tokens computed by prefill batches, re-prefill of retracted requests included "
     "(sum of #new-token of Prefill batch lines)."),
    ("sglang_scheduler_prefill_cached_tokens_total", "prefill_cached_tokens",
     "Prompt tokens served from the radix cache (sum of #cached-token of Prefill batch lines)."),
    ("sglang_scheduler_decode_tokens_total", "decode_tokens",
     "Estimated decode tokens: per Decode batch line, #running-req x decode-log interval x accept len "
     "(accept len 1 without speculative decoding)."),
    ("sglang_scheduler_admitted_requests_total", "admitted_requests",
     "Requests admitted from the waiting queue: #new-seq of Prefill batch lines, less the continuing "
     "request of a chunked prefill (previous batch's #new-token reached chunked_prefill_size)."),
    ("sglang_scheduler_queue_request_seconds_total", "queue_request_seconds",
     "Time integral of #queue-req (Prefill/Decode batch lines) in request-seconds; mean queue wait = "
     "rate(this) / rate(sglang_scheduler_admitted_requests_total) (Little's law)."),
)

# (gauge key in SchedulerState.gauges, metric name, HELP) for latest-line gauges.
_LINE_GAUGES = (
    ("running_requests", "sglang_scheduler_running_requests",
     "Running requests: #running-req of the latest Decode batch line (actual decode batch) or Prefill "
     "batch line (decode batch at schedule time)."),
    ("queue_requests", "sglang_scheduler_queue_requests",
     "Waiting requests: #queue-req of the latest Prefill/Decode batch line."),
    ("kv_usage_ratio", "sglang_scheduler_kv_usage_ratio",
     "KV-cache occupancy (token usage, excludes evictable radix cache) of the latest Prefill/Decode "
     "batch line; for hybrid pools the maximum over the device pools."),
    ("kv_used_tokens", "sglang_scheduler_kv_used_tokens",
     "KV tokens in use: #token (#full token, #gpu token) of the latest stats line."),
    ("pending_tokens", "sglang_scheduler_pending_tokens",
     "Tokens of all waiting requests: #pending-token of the latest Prefill batch line (2026-04+)."),
    ("gen_throughput", "sglang_scheduler_gen_throughput_tokens_per_second",
     "gen throughput (token/s) of the latest Decode batch line, as computed by SGLang."),
    ("input_throughput", "sglang_scheduler_input_throughput_tokens_per_second",
     "input throughput (token/s) of the latest Prefill batch line, as computed by SGLang."),
    ("spec_accept_length", "sglang_scheduler_spec_accept_length",
     "Speculative decoding: accept len (mean committed tokens per request per verify step) of the "
     "latest Decode batch line."),
    ("spec_accept_rate", "sglang_scheduler_spec_accept_ratio",
     "Speculative decoding: accept rate of the latest Decode batch line (semantics changed 2026-04-28)."),
    ("pd_preallocated_usage_ratio", "sglang_scheduler_pd_preallocated_usage_ratio",
     "PD decode: pre-allocated usage of the latest Decode batch line."),
    ("new_token_ratio", "sglang_scheduler_new_token_ratio",
     "Admission reservation factor after the latest retraction (#new_token_ratio: a -> b, the b)."),
)

_CAPACITY_GAUGES = (
    ("max_total_num_tokens", "sglang_scheduler_max_total_tokens",
     "KV-cache capacity in tokens: max_total_num_tokens of the start-up capacity line."),
    ("max_running_requests", "sglang_scheduler_max_running_requests",
     "Configured ceiling of running requests: max_running_requests of the start-up capacity line."),
    ("context_len", "sglang_scheduler_context_length",
     "Model context length in tokens: context_len of the start-up capacity line."),
    ("chunked_prefill_size", "sglang_scheduler_chunked_prefill_size",
     "Chunked-prefill chunk in tokens: chunked_prefill_size of the start-up capacity line."),
)

_HISTOGRAMS = (
    ("sglang_scheduler_prefill_batch_tokens", "prefill_tokens",
     "Tokens computed per prefill batch (#new-token of each Prefill batch line)."),
    ("sglang_scheduler_queue_wait_seconds", "queue_wait",
     "Per-request queue wait: queue_duration of 'Req Time Stats(...)' / 'ReqTimeStats(...)' lines "
     "(--enable-request-time-stats-logging, 2025-05+)."),
)

_DP = ("dp_rank",)


class SchedulerCollector(Collector):
    """Yields every ``sglang_scheduler_*`` family from :class:`~exporter.scheduler.state.SchedulerStates`.

    Args:
        pipeline: The pipeline whose state is read (under its lock).
        idle_after: Seconds after the latest Prefill/Decode line of a scheduler past which its
            latest-line gauges are no longer exported (SGLang prints nothing while idle, so the last
            values would be stale). ``None`` keeps them forever (one-shot mode).
        clock: Wall-clock source, seconds since the epoch.
    """

    def __init__(self, pipeline: Pipeline, idle_after: float | None = 60.0, clock=time.time):
        self.pipeline = pipeline
        self.idle_after = idle_after
        self.clock = clock

    def collect(self) -> Iterator[Metric]:
        with self.pipeline.lock:
            return iter(self._families(self.pipeline.states))

    def _families(self, st: SchedulerStates) -> list[Metric]:
        now = self.clock()
        scheds = sorted(st.schedulers.items(), key=lambda kv: (len(kv[0]), kv[0]))
        out: list[Metric] = []

        batch = HistogramMetricFamily(
            "sglang_scheduler_batch_size",
            "Actual batch size: #new-seq of each Prefill batch line (phase=prefill) and #running-req of "
            "each Decode batch line (phase=decode, sampled every decode-log interval).",
            labels=("dp_rank", "phase"))
        kv_hist = HistogramMetricFamily(
            "sglang_scheduler_kv_usage_observed_ratio",
            "KV-cache occupancy observed on each Prefill/Decode batch line (token usage; maximum over "
            "device pools for hybrid models).",
            labels=("dp_rank", "phase"))
        batches = CounterMetricFamily(
            "sglang_scheduler_batches_total",
            "Forward batches: one per Prefill batch line (phase=prefill); decode steps estimated as Decode "
            "batch lines x decode-log interval (phase=decode).",
            labels=("dp_rank", "phase"))
        recomputed = CounterMetricFamily(
            "sglang_scheduler_recomputed_tokens_total",
            "Tokens that retracted requests must compute again: #new_tokens_gained of retraction lines "
            "(method=new_tokens_gained, 2025-12-24+), else #retracted_reqs x (#token / #running-req) of the "
            "latest Decode batch line (method=estimated).",
            labels=("dp_rank", "method"))
        counters = [CounterMetricFamily(name, help_, labels=_DP) for name, _, help_ in _COUNTERS]
        hists = [HistogramMetricFamily(name, help_, labels=_DP) for name, _, help_ in _HISTOGRAMS]
        gauges = {key: GaugeMetricFamily(name, help_, labels=_DP) for key, name, help_ in _LINE_GAUGES}
        pools = GaugeMetricFamily(
            "sglang_scheduler_kv_pool_usage_ratio",
            "KV-cache occupancy per pool of the latest stats line: pool=kv (token usage), full, swa, mamba "
            "(hybrid models), gpu, cpu (HiSparse device and host tiers).",
            labels=("dp_rank", "pool"))
        pd = GaugeMetricFamily(
            "sglang_scheduler_pd_queue_requests",
            "PD disaggregation queues of the latest stats line: bootstrap (#bootstrap-req, #prealloc-req, "
            "#unbootstrapped-req on prefill), inflight (#inflight-req, #transferring-req), optimistic, and "
            "on decode prealloc (#prealloc-req), transfer (#transfer-req), retracted (#retracted-req).",
            labels=("dp_rank", "queue"))
        caps = {key: GaugeMetricFamily(name, help_, labels=_DP) for key, name, help_ in _CAPACITY_GAUGES}
        interval = GaugeMetricFamily(
            "sglang_scheduler_decode_log_interval",
            "Decode steps per Decode batch line in effect: decode_log_interval of the server_args line, "
            "else --sglang.decode-log-interval.", labels=_DP)
        last_stats = GaugeMetricFamily(
            "sglang_scheduler_last_stats_line_timestamp_seconds",
            "Wall-clock time the exporter read the scheduler's latest Prefill/Decode batch line.",
            labels=_DP)

        for dp, s in scheds:
            for phase, attr in (("prefill", "batch_size_prefill"), ("decode", "batch_size_decode")):
                _add_hist(batch, [dp, phase], s, attr)
            for phase, attr in (("prefill", "kv_usage_prefill"), ("decode", "kv_usage_decode")):
                _add_hist(kv_hist, [dp, phase], s, attr)
            batches.add_metric([dp, "prefill"], s.counter("prefill_batches"))
            batches.add_metric([dp, "decode"], s.counter("decode_steps"))
            recomputed.add_metric([dp, "new_tokens_gained"], s.counter("recomputed_tokens_gained"))
            recomputed.add_metric([dp, "estimated"], s.counter("recomputed_tokens_estimated"))
            for fam, (_, attr, _) in zip(counters, _COUNTERS):
                fam.add_metric([dp], s.counter(attr))
            for fam, (_, attr, _) in zip(hists, _HISTOGRAMS):
                _add_hist(fam, [dp], s, attr)
            fresh = self.idle_after is None or (
                s.last_stats_wall is not None and now - s.last_stats_wall <= self.idle_after)
            if fresh:
                for key, value in s.gauges.items():
                    gauges[key].add_metric([dp], value)
                for pool, value in sorted(s.kv_pools.items()):
                    pools.add_metric([dp, pool], value)
                for queue, value in sorted(s.pd_queues.items()):
                    pd.add_metric([dp, queue], value)
            cap = st.effective_capacity(s)
            if cap is not None:
                for key, fam in caps.items():
                    value = getattr(cap, key)
                    if value is not None:
                        fam.add_metric([dp], value)
            interval.add_metric([dp], st.decode_log_interval)
            if s.last_stats_wall is not None:
                last_stats.add_metric([dp], s.last_stats_wall)

        out += [batch, batches, *counters, recomputed, kv_hist, *hists, *gauges.values(), pools, pd,
                *caps.values(), interval, last_stats]
        return out


def _add_hist(fam: HistogramMetricFamily, labels: list[str], s: SchedulerState, attr: str) -> None:
    bounds, cumulative, total = s.histogram(attr)
    buckets = [(_le(b), c) for b, c in zip(bounds, cumulative)]
    buckets.append(("+Inf", cumulative[-1]))
    fam.add_metric(labels, buckets, total)


def _le(bound: float) -> str:
    return repr(float(bound))


def path_label(path: str) -> str:
    """A file path as a label value: valid UTF-8 always.

    A path that is not valid UTF-8 (``os.fsdecode`` keeps its bytes as lone surrogates) would make
    the whole exposition fail to encode; its undecodable bytes are shown as ``\\xNN`` instead.
    """
    try:
        path.encode("utf-8")
        return path
    except UnicodeEncodeError:
        return path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


class ExporterCollector(Collector):
    """Yields the ``sglang_exporter_*`` self-metrics: lines, bytes, file opens, build info.

    Args:
        pipeline: The pipeline whose counts are read.
    """

    def __init__(self, pipeline: Pipeline):
        self.pipeline = pipeline

    def collect(self) -> Iterator[Metric]:
        p = self.pipeline
        lines = CounterMetricFamily(
            "sglang_exporter_log_lines_total",
            "Log lines read, by line kind and result (parsed; ignored: not a scheduler line; malformed: a "
            "scheduler line too damaged to apply).", labels=("kind", "result"))
        opens = CounterMetricFamily("sglang_exporter_log_file_opens_total",
                                    "Times a followed log file was opened.", labels=("path",))
        nbytes = CounterMetricFamily("sglang_exporter_log_bytes_read_total",
                                     "Bytes read from a followed log file.", labels=("path",))
        oversized = CounterMetricFamily("sglang_exporter_log_oversized_lines_total",
                                        "Lines dropped because they exceeded --log.max-line-bytes.",
                                        labels=("path",))
        present = GaugeMetricFamily("sglang_exporter_log_file_present",
                                    "1 when the followed log path exists, 0 while waiting for it.",
                                    labels=("path",))
        last = GaugeMetricFamily("sglang_exporter_last_line_timestamp_seconds",
                                 "Wall-clock time the exporter read its latest log line.")
        rotations = CounterMetricFamily(
            "sglang_exporter_log_rotations_total",
            "Times the followed path was found naming another file (rename + create, symlink swap); "
            "the old file is still read for --log.rotate-wait.", labels=("path",))
        truncations = CounterMetricFamily(
            "sglang_exporter_log_truncations_total",
            "Times the followed file was found shorter than the read offset (copytruncate); reading "
            "restarts at 0.", labels=("path",))
        behind = GaugeMetricFamily(
            "sglang_exporter_log_behind_bytes",
            "Bytes between the read offset and the end of the followed file (and of a rotated file "
            "still being drained) at the latest check.", labels=("path",))
        matched = GaugeMetricFamily(
            "sglang_exporter_log_glob_matched_files",
            "Files a --log.path glob matched at the latest check.", labels=("pattern",))
        watch = GaugeMetricFamily(
            "sglang_exporter_log_watch_mode_info",
            "How file changes are noticed: inotify (file events plus the poll timer) or poll (timer only: "
            "--log.watch-mode=poll, or inotify could not be set up); value 1.", labels=("mode",))
        with p.lock:
            for path, fs in sorted(p.files.items()):
                label = [path_label(path)]
                rotations.add_metric(label, fs.rotations)
                truncations.add_metric(label, fs.truncations)
                behind.add_metric(label, fs.behind_bytes)
                opens.add_metric(label, fs.opens)
                nbytes.add_metric(label, fs.bytes_read)
                present.add_metric(label, 1 if fs.present else 0)
                oversized.add_metric(label, fs.oversized_lines)
            for pattern, n in sorted(p.patterns.items()):
                matched.add_metric([path_label(pattern)], n)
            if p.watch_mode is not None:
                watch.add_metric([p.watch_mode], 1)
            for (kind, result), n in sorted(p.lines.items()):
                lines.add_metric([kind, result], n)
            if p.last_line_wall is not None:
                last.add_metric([], p.last_line_wall)
        info = GaugeMetricFamily("sglang_exporter_build_info",
                                 "Build information of the exporter; value 1.",
                                 labels=("version", "python_version"))
        info.add_metric([__version__, platform.python_version()], 1)
        return iter([lines, nbytes, opens, oversized, present, rotations, truncations, behind, matched, watch,
                     last, info])


class GuardedCollectors(Collector):
    """Runs named collectors so that one that raises cannot fail the whole scrape.

    Emits ``sglang_exporter_collector_success{collector}`` (1/0) and
    ``sglang_exporter_collector_duration_seconds{collector}`` as node_exporter does; a failing
    collector's families are dropped from that scrape and its error is logged. A family without
    samples (no GPU, no speculative decoding, no glob) is dropped too: a HELP/TYPE block with
    nothing under it only adds noise to ``/metrics``.

    Args:
        collectors: ``(name, collector)`` pairs.
        clock: Monotonic clock for durations.
    """

    def __init__(self, collectors: list[tuple[str, Collector]], clock: Callable[[], float] = time.perf_counter):
        self.collectors = collectors
        self.clock = clock

    def collect(self) -> Iterator[Metric]:
        success = GaugeMetricFamily("sglang_exporter_collector_success",
                                    "1 when the named collector succeeded in this scrape.", labels=("collector",))
        duration = GaugeMetricFamily("sglang_exporter_collector_duration_seconds",
                                     "Time the named collector took in this scrape.", labels=("collector",))
        for name, collector in self.collectors:
            start = self.clock()
            try:
                families = list(collector.collect())
                ok = 1
            except Exception:
                log.exception("collector %s failed", name)
                families, ok = [], 0
            duration.add_metric([name], self.clock() - start)
            success.add_metric([name], ok)
            yield from (family for family in families if family.samples)
        yield success
        yield duration

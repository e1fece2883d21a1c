"""SGLang's own /metrics (``--enable-metrics``), faithful to the released code, for tests without SGLang.

The names, types, HELP texts, buckets and label sets are SGLang's, per release (sources:
``python/sglang/srt/observability/metrics_collector.py`` and its earlier homes, read in the released
wheels 0.5.7, 0.5.10, 0.5.12, 0.5.17; the research note behind this module cites every line; the
DP-attention series of 0.5.22 and the raw priority of the request histograms as the /metrics of a real
0.5.23 server printed them on the test bed):

* every name is ``sglang:<name>`` (a colon, which prometheus_client does not escape); counters are
  defined with an explicit ``_total``; multiprocess mode writes no ``_created`` samples;
* scheduler series carry ``model_name, engine_type, tp_rank, pp_rank, moe_ep_rank`` (0.5.7+),
  ``dp_rank`` only with more than one DP rank, ``priority=""`` only with priority scheduling (0.5.10+,
  the queue gauges then add one series per priority);
* which TP ranks write what: the retraction counters, the decode modes of
  ``cuda_graph_passes_total`` and ``queue_time_seconds`` on EVERY TP rank (identical copies), the
  gauges, ``realtime_tokens_total`` and the prefill modes (0.5.10+), ``prefill_effective_tokens_total``
  (modelled from 0.5.22; seen on 0.5.18 and 0.5.23) only on the first attention-TP
  rank of each DP group; ``max_total_num_tokens`` on every rank from 0.5.11 on;
* the request latency histograms come from the tokenizer process: no rank labels; ``engine_type``
  since 0.5.11, ``is_streaming`` on TTFT and E2E since 0.5.17; the per-request TPOT histogram
  ``request_time_per_output_token_seconds`` (ITL's buckets, ``is_streaming``) since 0.5.22.

:class:`NativeServer` serves such an exposition over real HTTP (prometheus_client, as SGLang does),
from counters the test advances. :func:`samples` gives the sample names and label sets of every
modelled release, which tests/test_rules.py checks the rules' ``sglang:`` references against.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

#: Releases whose label shapes are modelled (what changed at each one).
VERSIONS = ("0.5.7", "0.5.10", "0.5.17", "0.5.22")

QUEUE_TIME_BUCKETS_0_5_3 = (0, 0.1, 0.2, 0.5, 1, 2, 3, 4, 5, 10, 15, 20, 30, 40, 50, 60, 70, 80, 90, 100, 200,
                            300, 400, 500, 600, 700, 800, 900, 1000, 1200, 1400, 1600, 1800, 2000, 2500, 3000)
#: 0.5.12 added 0.001, 0.005, 0.01 and 0.05.
QUEUE_TIME_BUCKETS_0_5_12 = tuple(sorted((*QUEUE_TIME_BUCKETS_0_5_3, 0.001, 0.005, 0.01, 0.05)))
TTFT_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400)
ITL_BUCKETS = (0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060, 0.080, 0.100,
               0.200, 0.400, 0.600, 0.800, 1.0, 2.0, 4.0, 6.0, 8.0)
#: sglang:dp_attention_token_imbalance_ratio (0.5.22+, as a 0.5.23 server writes it).
DP_IMBALANCE_BUCKETS = (1, 1.5, 2, 2.5, 3, 4, 5, 7.5, 10, 15, 20, 30, 45, 60)
E2E_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600, 1200, 1800, 2400)

#: name (as defined in SGLang, counters with _total) -> (type, HELP)
HELP = {
    "sglang:num_retracted_requests_total": ("counter", "Total number of retracted requests."),
    "sglang:num_retracted_input_tokens_total": ("counter", "Total number of retracted input tokens."),
    "sglang:num_retracted_output_tokens_total": ("counter", "Total number of retracted output tokens."),
    "sglang:cuda_graph_passes_total": ("counter", "Total number of forward passes categorized by CUDA graph."),
    "sglang:realtime_tokens_total": ("counter", "Total number of tokens processed (updated on each log interval). "
                                                "mode: prefill_compute, prefill_cache, decode."),
    "sglang:prefill_effective_tokens_total": ("counter", "Effective prefill tokens with retracted-request re-counts "
                                                         "excluded, updated on each log interval. mode: device_hit, "
                                                         "host_hit, storage_hit, input. Windowed prefix cache hit "
                                                         "rate = rate(sum of *_hit) / rate(sum of all modes); "
                                                         "per-tier rate uses a single *_hit mode in the numerator."),
    "sglang:num_running_reqs": ("gauge", "The number of running requests."),
    "sglang:num_queue_reqs": ("gauge", "The number of requests in the waiting queue."),
    "sglang:token_usage": ("gauge", "The token usage."),
    "sglang:gen_throughput": ("gauge", "The generation throughput (token/s)."),
    "sglang:max_total_num_tokens": ("gauge", "Maximum total number of tokens in the KV cache pool."),
    "sglang:dp_attention_steps_total": ("counter", "MLP-sync steps on this DP rank. rank_state=idle: this rank had no "
                                                   "tokens and only ran to keep the DP collectives in lockstep."),
    "sglang:dp_attention_tokens_total": ("counter", "Tokens of MLP-sync steps on this DP rank. kind=scheduled: tokens "
                                                    "this rank ran; kind=imbalance: tokens the busiest rank ran beyond "
                                                    "this rank, i.e. capacity lost to DP imbalance on this rank."),
    "sglang:dp_attention_token_imbalance_ratio": ("histogram", "Per MLP-sync step, max tokens over mean tokens across "
                                                  "the DP ranks (1.0 = balanced, num_dp_ranks = one busy rank). "
                                                  "Reported once per engine, by the scheduler of DP rank 0."),
    "sglang:queue_time_seconds": ("histogram", "Histogram of queueing time in seconds."),
    "sglang:time_to_first_token_seconds": ("histogram", "Histogram of time to first token in seconds."),
    "sglang:inter_token_latency_seconds": ("histogram", "Histogram of inter-token latency in seconds."),
    "sglang:e2e_request_latency_seconds": ("histogram", "Histogram of End-to-end request latency in seconds"),
    "sglang:request_time_per_output_token_seconds": ("histogram", "Per-request TPOT in seconds: (finished_time - "
                                                     "first_token_time) / (completion_tokens - 1)."),
}

#: The modes of sglang:cuda_graph_passes_total: decode since 0.5.7, prefill since 0.5.10.
DECODE_MODES = ("decode_cuda_graph", "decode_none")
PREFILL_MODES = ("prefill_cuda_graph", "prefill_none")


@dataclass(frozen=True)
class Shape:
    """One SGLang server: its release, parallelism and role (``--disaggregation-mode``)."""

    version: str = "0.5.17"
    tp_size: int = 2
    dp_size: int = 1          # DP attention: dp_size groups of tp_size / dp_size attention-TP ranks
    engine_type: str = "unified"
    model_name: str = "Qwen/Qwen3-8B"
    priority_scheduling: bool = False

    def at_least(self, version: str) -> bool:
        return tuple(map(int, self.version.split("."))) >= tuple(map(int, version.split(".")))

    def ranks(self) -> list[tuple[int, int | None, bool]]:
        """``(tp_rank, dp_rank or None, writes the A-guarded series)`` of every scheduler process."""
        attn_tp = self.tp_size // self.dp_size
        return [(tp, tp // attn_tp if self.dp_size > 1 else None, tp % attn_tp == 0) for tp in range(self.tp_size)]

    def scheduler_labels(self, tp_rank: int, dp_rank: int | None) -> dict[str, str]:
        labels = {"model_name": self.model_name, "engine_type": self.engine_type if self.at_least("0.5.7") else "unified",
                  "tp_rank": str(tp_rank), "pp_rank": "0"}
        if self.at_least("0.5.7"):
            labels["moe_ep_rank"] = "0"
        if dp_rank is not None:
            labels["dp_rank"] = str(dp_rank)
        if self.priority_scheduling and self.at_least("0.5.10"):
            labels["priority"] = ""
        return labels

    def tokenizer_labels(self) -> dict[str, str]:
        labels = {"model_name": self.model_name}
        if self.at_least("0.5.11"):
            labels["engine_type"] = self.engine_type
        if self.priority_scheduling and self.at_least("0.5.10"):
            labels["priority"] = ""
        return labels


@dataclass
class Scheduler:
    """The counters and latest report of one DP rank's scheduler (every TP rank of it reports them)."""

    decode_passes: float = 0          # split 9:1 between decode_cuda_graph and decode_none
    prefill_passes: float = 0
    retracted_requests: float = 0
    decode_tokens: float = 0
    prefill_input_tokens: float = 0     # the prompts' tokens computed once
    prefill_recomputed_tokens: float = 0  # prefill tokens computed again for retracted requests
    running: float = 0
    queue: float = 0
    queue_by_priority: dict[str, float] = field(default_factory=dict)
    token_usage: float = 0
    gen_throughput: float = 0
    max_total_num_tokens: float = 0
    queue_times: list[float] = field(default_factory=list)
    running_by_priority: dict[str, float] = field(default_factory=dict)   # 0.5.22+ (seen on 0.5.18, 0.5.23)
    dp_steps: dict[str, float] = field(default_factory=dict)              # rank_state -> steps, 0.5.22+
    dp_tokens: dict[str, float] = field(default_factory=dict)             # kind -> tokens, 0.5.22+
    imbalance_ratios: list[float] = field(default_factory=list)           # DP rank 0 only, 0.5.22+


@dataclass
class Tokenizer:
    """Observations of the tokenizer process's request latency histograms."""

    ttft: list[tuple[float, bool]] = field(default_factory=list)     # (seconds, is_streaming)
    itl: list[float] = field(default_factory=list)
    e2e: list[tuple[float, bool]] = field(default_factory=list)
    tpot: list[tuple[float, bool]] = field(default_factory=list)     # per request, 0.5.22+ (seen on 0.5.23)
    #: with priority scheduling (0.5.22+, seen on 0.5.23): the raw priorities the requests sent; every
    #: observation above is written once per priority (label priority="<int>")
    priorities: tuple[str, ...] = ()


def _sample(family, labels: dict[str, str], value: float) -> None:
    """One sample of a counter or gauge family (its own label set: SGLang's series of one family
    differ in their keys, e.g. priority only on some)."""
    name = family.name + ("_total" if family.type == "counter" else "")
    family.add_sample(name, labels, value)


def _histogram(family, labels: dict[str, str], values: list[float], bounds) -> None:
    """Cumulative buckets (``le`` as prometheus_client writes it), then _count and _sum."""
    for b in bounds:
        family.add_sample(family.name + "_bucket", {**labels, "le": str(float(b))}, float(sum(v <= b for v in values)))
    family.add_sample(family.name + "_bucket", {**labels, "le": "+Inf"}, float(len(values)))
    family.add_sample(family.name + "_count", labels, float(len(values)))
    family.add_sample(family.name + "_sum", labels, float(sum(values)))


class _Collector(Collector):
    def __init__(self, server: NativeServer):
        self.server = server

    def collect(self):
        return self.server.families()


class NativeServer:
    """An SGLang server's /metrics over real HTTP on 127.0.0.1 (``start``/``stop``); the test changes
    ``schedulers[dp_rank]`` and ``tokenizer`` between scrapes (under ``lock``)."""

    def __init__(self, shape: Shape = Shape()):
        self.shape = shape
        self.schedulers = {dp: Scheduler() for dp in sorted({d or 0 for _, d, _ in shape.ranks()})}
        self.tokenizer = Tokenizer()
        self.lock = threading.Lock()
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_Collector(self))
        self._httpd = None

    # -------------------------------------------------------------------- exposition

    def families(self) -> list:
        s = self.shape
        with self.lock:
            fam = {name: self._family(name) for name in HELP}
            for tp, dp, writes_a in s.ranks():
                st = self.schedulers[dp or 0]
                labels = s.scheduler_labels(tp, dp)
                self._scheduler(fam, st, labels, writes_a)
            self._tokenizer(fam)
        return [f for f in fam.values() if f.samples]

    @staticmethod
    def _family(name: str):
        kind, help_text = HELP[name]
        if kind == "counter":
            return CounterMetricFamily(name, help_text)
        if kind == "gauge":
            return GaugeMetricFamily(name, help_text)
        return HistogramMetricFamily(name, help_text)

    def _scheduler(self, fam: dict, st: Scheduler, labels: dict[str, str], writes_a: bool) -> None:
        s = self.shape

        def add(name: str, value: float, **extra: str) -> None:
            _sample(fam[name], {**labels, **extra}, value)

        # B: every TP rank (identical copies)
        if st.retracted_requests:  # created on the first event, as labels() in SGLang creates the child
            add("sglang:num_retracted_requests_total", st.retracted_requests)
        if st.decode_passes:
            add("sglang:cuda_graph_passes_total", st.decode_passes * 0.9, mode="decode_cuda_graph")
            add("sglang:cuda_graph_passes_total", st.decode_passes * 0.1, mode="decode_none")
        if st.queue_times or st.decode_passes or st.prefill_passes:
            bounds = QUEUE_TIME_BUCKETS_0_5_12 if s.at_least("0.5.12") else QUEUE_TIME_BUCKETS_0_5_3
            _histogram(fam["sglang:queue_time_seconds"], labels, st.queue_times, bounds)
        if st.max_total_num_tokens and s.at_least("0.5.11"):
            add("sglang:max_total_num_tokens", st.max_total_num_tokens)
        if not writes_a:
            return
        # A: the first attention-TP rank of each DP group
        if st.prefill_passes and s.at_least("0.5.10"):
            add("sglang:cuda_graph_passes_total", st.prefill_passes, mode="prefill_none")
        if st.decode_tokens:
            add("sglang:realtime_tokens_total", st.decode_tokens, mode="decode")
        if st.prefill_input_tokens and s.at_least("0.5.10"):
            # prefill_compute: new input plus the replay of retracted requests; "input" without those
            # re-counts (0.5.18+: seen on the test bed's 0.5.18 and 0.5.23, modelled from 0.5.22)
            add("sglang:realtime_tokens_total", st.prefill_input_tokens + st.prefill_recomputed_tokens,
                mode="prefill_compute")
            if s.at_least("0.5.22"):
                for mode in ("input", "device_hit", "host_hit", "storage_hit"):
                    add("sglang:prefill_effective_tokens_total", st.prefill_input_tokens if mode == "input" else 0,
                        mode=mode)
        if st.max_total_num_tokens and not s.at_least("0.5.11"):
            add("sglang:max_total_num_tokens", st.max_total_num_tokens)
        add("sglang:num_running_reqs", st.running)
        add("sglang:num_queue_reqs", st.queue)
        if s.priority_scheduling and s.at_least("0.5.10"):
            for prio, n in st.queue_by_priority.items():
                add("sglang:num_queue_reqs", n, priority=prio)
        if s.priority_scheduling and s.at_least("0.5.22"):
            for prio, n in st.running_by_priority.items():
                add("sglang:num_running_reqs", n, priority=prio)
        add("sglang:token_usage", st.token_usage)
        add("sglang:gen_throughput", st.gen_throughput)
        if s.at_least("0.5.22"):
            for state, n in st.dp_steps.items():
                add("sglang:dp_attention_steps_total", n, rank_state=state)
            for kind, n in st.dp_tokens.items():
                add("sglang:dp_attention_tokens_total", n, kind=kind)
            if labels.get("dp_rank", "0") == "0":
                _histogram(fam["sglang:dp_attention_token_imbalance_ratio"], labels, st.imbalance_ratios,
                           DP_IMBALANCE_BUCKETS)

    def _tokenizer(self, fam: dict) -> None:
        s, t = self.shape, self.tokenizer
        raw = s.priority_scheduling and s.at_least("0.5.22") and t.priorities
        for base in ([{**s.tokenizer_labels(), "priority": p} for p in t.priorities] if raw else [s.tokenizer_labels()]):
            self._tokenizer_series(fam, base)

    def _tokenizer_series(self, fam: dict, base: dict[str, str]) -> None:
        s, t = self.shape, self.tokenizer
        for name, observations, bounds in (("sglang:time_to_first_token_seconds", t.ttft, TTFT_BUCKETS),
                                           ("sglang:e2e_request_latency_seconds", t.e2e, E2E_BUCKETS),
                                           ("sglang:request_time_per_output_token_seconds", t.tpot, ITL_BUCKETS)):
            if not observations or (t.tpot is observations and not s.at_least("0.5.22")):
                continue
            for streaming in (False, True) if s.at_least("0.5.17") else (None,):
                labels = dict(base) if streaming is None else {**base, "is_streaming": str(streaming).lower()}
                values = [v for v, st in observations if streaming is None or st == streaming]
                _histogram(fam[name], labels, values, bounds)
        if t.itl:
            _histogram(fam["sglang:inter_token_latency_seconds"], base, t.itl, ITL_BUCKETS)

    # -------------------------------------------------------------------- HTTP

    def start(self, port: int) -> str:
        """Serve /metrics on 127.0.0.1:port; returns the URL."""
        self._httpd, _ = start_http_server(port, addr="127.0.0.1", registry=self.registry)
        return f"http://127.0.0.1:{port}/metrics"

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None


def exposition(shape: Shape, server: NativeServer | None = None) -> str:
    """The /metrics text of one server (a busy default one when ``server`` is None)."""
    from prometheus_client import generate_latest

    server = server or busy(shape)
    return generate_latest(server.registry).decode()


def busy(shape: Shape) -> NativeServer:
    """A server with every family populated (retractions, both phases, priorities, every histogram)."""
    server = NativeServer(shape)
    for st in server.schedulers.values():
        st.decode_passes, st.prefill_passes, st.retracted_requests, st.decode_tokens = 1000, 20, 30, 64000
        st.prefill_input_tokens, st.prefill_recomputed_tokens = 12000, 470
        st.running, st.queue, st.token_usage, st.gen_throughput, st.max_total_num_tokens = 64, 12, 0.93, 2100, 87552
        # a request sent without a priority is at -sys.maxsize - 1 (as real 0.5.18 and 0.5.23 print it)
        st.queue_by_priority = {"0": 4, "1": 8, "-9223372036854775808": 0}
        st.queue_times = [0.05, 0.4, 2.5, 12]
        st.running_by_priority = {"0": 24, "10": 40, "-9223372036854775808": 0}
        st.dp_steps, st.dp_tokens = {"active": 900, "idle": 100}, {"scheduled": 64000, "imbalance": 9000}
        st.imbalance_ratios = [1.0, 1.2, 2.0]
    server.tokenizer = Tokenizer(ttft=[(0.3, True), (1.5, False)], itl=[0.02, 0.03], e2e=[(4.0, True), (9.0, False)],
                                 tpot=[(0.025, True), (0.04, False)],
                                 priorities=("0", "10", ""))  # "": the tokenizer's request without a priority
    return server


#: The shapes whose samples the rules' references are checked against: every modelled release,
#: with and without DP attention, plain and PD decode, with priority scheduling.
SHAPES = (Shape("0.5.7", tp_size=2), Shape("0.5.10", tp_size=4, dp_size=2, priority_scheduling=True),
          Shape("0.5.17", tp_size=2, engine_type="decode"), Shape("0.5.17", tp_size=8, dp_size=8),
          Shape("0.5.22", tp_size=2, dp_size=2, priority_scheduling=True), Shape("0.5.22", tp_size=1, priority_scheduling=True),
          Shape("0.5.22", tp_size=2, dp_size=2), Shape("0.5.22", tp_size=1))


def samples() -> dict[str, list[dict[str, str]]]:
    """``{sample or family name: [labels, ...]}`` over :data:`SHAPES` (what real servers expose)."""
    from prometheus_client.parser import text_string_to_metric_families

    found: dict[str, list[dict[str, str]]] = {}
    for shape in SHAPES:
        for family in text_string_to_metric_families(exposition(shape)):
            for s in family.samples:
                found.setdefault(s.name, []).append(dict(s.labels))
                found.setdefault(family.name + ("_total" if family.type == "counter" else ""), []).append(dict(s.labels))
    return found


def label_shapes() -> set[tuple[str, frozenset[str]]]:
    """``(sample name, label keys)`` of every series of :data:`SHAPES` (the shapes promtool inputs may use)."""
    return {(name, frozenset(labels)) for name, seen in samples().items() for labels in seen}

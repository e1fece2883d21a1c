"""Typed events that the parser produces from SGLang scheduler log lines.

Every event carries a :class:`Origin` (who printed the line and when) plus the fields of its
line kind, already normalised across SGLang eras (see ``docs/log-format.md`` and
``docs/metrics.md``). Units: token counts are tokens, ratios are 0..1, durations are
seconds, throughputs are tokens per second. A field the line did not print is ``None``.

Events are plain frozen dataclasses with ``slots`` so that creating one per line is cheap.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

#: A stage, process or group name as SGLang Omni's configs spell them (``thinker``, ``talker_ar``,
#: ``image_encoder``); anything else read where a name should be is no name (and must never become a
#: label value).
STAGE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")


@dataclass(frozen=True, slots=True)
class Origin:
    """Who printed a line and when, read from the line's prefix.

    Attributes:
        dp_rank: The scheduler's identity: the ``DP<n>`` tag of SGLang's prefix (``[... DP3 TP3]``,
            since 2024-08-25), the inline ``[gpu_id=<n>]`` / ``[gpu=<n>]`` tag of 2024-05..08 logs,
            or ``"0"`` when the line has neither.
        replica: The other rank tags in a canonical order (``PP``, ``ATTN_CP``, ``MOE_DP``, ``TP``,
            ``EP``), joined by spaces, e.g. ``"PP1 TP0"``; ``""`` when there are none. Lines of one
            scheduler printed by different replicas (TP ranks, pipeline stages) differ only here.
        log_time: The line's own timestamp in seconds (naive wall clock of the server: date and time
            ``[YYYY-MM-DD HH:MM:SS(.mmm)]``, or seconds of the day for the 2024 time-only
            ``[HH:MM:SS TP0]`` prefix), or ``None`` when the line has no timestamp.
        time_of_day_only: True when ``log_time`` came from a time-only prefix (it wraps at midnight).
        stage: The SGLang Omni pipeline stage whose scheduler printed the line (``thinker``,
            ``talker_ar``, ...); ``""`` for plain SGLang. With ``dp_rank`` it is the scheduler's
            identity. The parser leaves it empty; the attribution step
            (:mod:`exporter.sources.log.attribution`) sets it for Omni lines.
        task: For a line in SGLang Omni's format (``DATE TIME,ms [LEVEL] logger: message``), the
            ``processName/threadName`` that the logging shim (``deploy/sglang-omni/sitecustomize.py``)
            adds after the level (``"stage-thinker/scheduler-thinker"``), or ``""`` when the line
            has no such token (Omni's stock format); ``None`` for every other format.
    """

    dp_rank: str = "0"
    replica: str = ""
    log_time: float | None = None
    time_of_day_only: bool = False
    stage: str = ""
    task: str | None = None


@dataclass(frozen=True, slots=True)
class KvUsage:
    """KV-cache occupancy fields shared by Prefill and Decode lines (``docs/log-format.md#kv-usage``).

    Attributes:
        pools: ``token usage`` ratio per pool, keys among ``kv`` (plain ``token usage``), ``full``,
            ``swa``, ``mamba`` (hybrid models, 2025-06+), ``gpu`` and ``cpu`` (HiSparse, 2026-04+).
        used_tokens: KV tokens in use of the main pool: ``#token`` (plain), ``#full token`` or the
            2025-06/07 ``#token: full=F`` form, or ``#gpu token`` (HiSparse); ``None`` if not printed.
        swa_tokens: ``#swa token`` (or the 2025-06/07 ``#token: full=F, swa=S`` form's ``S``): tokens in
            use of a hybrid model's sliding-window pool; ``None`` if not printed.
        mamba_num: ``mamba num``: request states in use of a hybrid model's mamba pool; ``None`` if
            not printed.
    """

    pools: dict[str, float] = field(default_factory=dict)
    used_tokens: int | None = None
    swa_tokens: int | None = None
    mamba_num: int | None = None

    @property
    def max_device_ratio(self) -> float | None:
        """Maximum usage over the device pools (every pool except HiSparse's host ``cpu`` tier).

        This is what SGLang's own ``sglang:token_usage`` gauge reports since 2026-04-10 and what
        alerting should use for hybrid models; ``None`` when the line printed no usage at all.
        """
        values = [v for k, v in self.pools.items() if k != "cpu"]
        return max(values) if values else None


@dataclass(frozen=True, slots=True)
class PrefillBatch:
    """One ``Prefill batch`` line: one prefill (extend) forward batch.

    Sources: ``new fill batch.`` (2024-01), ``Prefil batch.`` (v0.1.17), ``Prefill batch.`` /
    ``Prefill batch,`` (2024-06 onwards, comma since 2025-10-26), ``Prefill batch(mixed
    #running-req: N).`` (2024-08..11, ``--enable-mixed-chunk``).

    Attributes:
        new_seq: ``#new-seq`` (``#seq`` in 2024-01): requests in this batch, including a continuing
            chunk of a chunked prefill.
        new_token: ``#new-token`` (``#new_token``): tokens computed by this batch.
        cached_token: ``#cached-token`` (``#cached_token``): radix-cache hits of the batch.
        running_req: ``#running-req`` (``#running_req``; the mixed title's count): the running decode
            batch at schedule time.
        queue_req: ``#queue-req`` (``#remaining_req``): waiting requests.
        pending_token: ``#pending-token`` (2026-04+): tokens of all waiting requests.
        replay_token: ``#replay-token`` (SGLang 0.5.21+, printed when non-zero): tokens the batch
            computed again to replay a sliding-window state, on top of ``#new-token`` (SGLang's own
            input throughput counts both).
        kv: KV-usage fragment.
        pd_queues: PD-prefill queues by normalised name: ``bootstrap`` (``#unbootstrapped-req``,
            ``#prealloc-req``, ``#bootstrap-req``), ``inflight`` (``#transferring-req``,
            ``#inflight-req``), ``optimistic`` (``#optimistic-req``).
        input_throughput: ``input throughput (token/s)``.
        graph: value of ``cuda|cpu|npu|musa graph`` (2026-01-30+), else ``None``.
    """

    origin: Origin
    new_seq: int
    new_token: int
    cached_token: int | None = None
    running_req: int | None = None
    queue_req: int | None = None
    pending_token: int | None = None
    kv: KvUsage = field(default_factory=KvUsage)
    pd_queues: dict[str, int] = field(default_factory=dict)
    input_throughput: float | None = None
    replay_token: int | None = None
    graph: bool | None = None


@dataclass(frozen=True, slots=True)
class DecodeBatch:
    """One ``Decode batch`` line, printed every ``--decode-log-interval`` decode steps.

    Sources: the untitled ``#running-req: ...`` line (2024-01..06), ``Decode batch.`` (2024-06 to
    2025-10-25), ``Decode batch,`` (2025-10-26+), each with an optional `` [iter]``.

    Attributes:
        running_req: ``#running-req``: the actual decode batch size of the logged step.
        queue_req: ``#queue-req``.
        kv: KV-usage fragment.
        accept_len: ``accept len`` (speculative decoding, 2025-01+): mean committed tokens per
            request per verify step.
        accept_rate: ``accept rate`` (2025-10+; semantics changed 2026-04-28).
        gen_throughput: ``gen throughput (token/s)``.
        pd_queues: PD-decode queues: ``prealloc`` (``#prealloc-req``), ``transfer``
            (``#transfer-req``), ``retracted`` (``#retracted-req``).
        preallocated_usage: ``pre-allocated usage`` ratio (PD decode).
        graph: value of ``cuda|cpu|npu|musa graph`` (2025-05+), else ``None``.
    """

    origin: Origin
    running_req: int
    queue_req: int | None = None
    kv: KvUsage = field(default_factory=KvUsage)
    accept_len: float | None = None
    accept_rate: float | None = None
    gen_throughput: float | None = None
    pd_queues: dict[str, int] = field(default_factory=dict)
    preallocated_usage: float | None = None
    graph: bool | None = None


@dataclass(frozen=True, slots=True)
class Retraction:
    """One retraction event: the KV pool ran out and running requests were sent back to the queue.

    Sources: ``decode out of memory happened,`` (2024-01..08), ``Decode out of memory happened.``
    (2024-08..2025-05), ``KV cache pool is full. Retract requests.`` (2025-05-31+, WARNING since
    2025-12-24), ``Testing retraction.`` (``SGLANG_TEST_RETRACT``). SGLang Omni prints the same text.

    Attributes:
        retracted_reqs: ``#retracted_reqs``.
        new_tokens_gained: ``#new_tokens_gained`` (2025-12-24+): KV slots freed by the retraction.
        new_token_ratio_before / new_token_ratio_after: the ``#new_token_ratio: a -> b`` values.
        aborted_retracted_reqs: ``#aborted_retracted_reqs`` (2025-10-01..29).
    """

    origin: Origin
    retracted_reqs: int
    new_tokens_gained: int | None = None
    new_token_ratio_before: float | None = None
    new_token_ratio_after: float | None = None
    aborted_retracted_reqs: int | None = None


@dataclass(frozen=True, slots=True)
class RetractAbort:
    """A request aborted by a retraction, not retracted (WARNING): ``retract_decode: aborted last
    request {rid} due to OOM`` (2026-03-12+: the only remaining request could not fit; its client got
    HTTP 500) and ``retract_decode: aborted request {rid}: {message}`` (SGLang 0.5.21+: a retracted
    request with no KV backup, PD decode; HTTP 503 or 500).

    The request id is not kept (it must never become a label).
    """

    origin: Origin


@dataclass(frozen=True, slots=True)
class Capacity:
    """The scheduler's start-up capacity line.

    Source: ``max_total_num_tokens=N, [chunked_prefill_size=C, ]max_prefill_tokens=P,
    [max_running_requests=R, ]context_len=L[, available_gpu_mem=G GB]`` (2024-06 onwards; the
    ``[gpu_id=..]`` form in 2024).
    """

    origin: Origin
    max_total_num_tokens: int
    max_running_requests: int | None = None
    context_len: int | None = None
    chunked_prefill_size: int | None = None
    max_prefill_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class KvAllocation:
    """The KV pool's start-up line: ``KV Cache is allocated. [dtype: D, ]#tokens: N, K size: X GB, V size: Y GB``.

    Sources: ``mem_cache/memory_pool.py`` (in logs since 2025 at least, corpus 035; ``dtype`` since 2026; MLA pools
    print ``KV size: X GB``
    instead of K and V; some builds print no sizes). Printed by every TP rank; SGLang Omni's stages print it
    through Omni's logging and never print the capacity line. A hybrid (SWA) pool prints one line per
    sub-pool, the full pool last; a speculative draft model prints its own pool after the target's.

    SGLang 0.5.21+ with post-capture KV sizing first prints ``KV Cache VA upper bound. ...`` (a
    reservation, not read) and, once CUDA graphs are captured, ``Post-capture KV sizing: KV cache
    allocated. dtype: D, #tokens: N, KV size: X GB, avail mem=Y GB``: the pool actually backed, which
    then wins over ``max_total_num_tokens`` of the capacity line (``post_capture``).

    Attributes:
        tokens: ``#tokens``: the pool's capacity in tokens (``max_total_num_tokens`` of the capacity line).
        size_bytes: K + V (or MLA's KV) size in bytes (SGLang prints GiB as ``GB``); ``None`` when not printed.
        post_capture: The ``Post-capture KV sizing`` form.
    """

    origin: Origin
    tokens: int
    size_bytes: float | None = None
    post_capture: bool = False


@dataclass(frozen=True, slots=True)
class ServerArgs:
    """The ``server_args=ServerArgs(...)`` start-up dump (``{'name': value, ...}`` since SGLang 0.5.19).

    Attributes:
        settings: Every setting of the dump as ``{name: value as printed (repr)}``, split at the dump's
            top-level commas only (:func:`exporter.sources.log.serverargs.split_server_args`); the
            fields below are read from it.
        decode_log_interval: ``decode_log_interval=`` (2024-10-30+): decode steps per Decode line.
        chunked_prefill_size: ``chunked_prefill_size=`` (None when ``None``, ``-1`` or absent).
        max_running_requests: ``max_running_requests=`` as configured (None when ``None``).
        rank_sizes: Parallel sizes by rank tag, where printed: ``DP`` (``dp_size``), ``TP`` (``tp_size``),
            ``PP`` (``pp_size``), ``EP`` (``ep_size``), ``ATTN_CP`` (``attn_cp_size``), ``MOE_DP``
            (``moe_dp_size``). A rank tag is below its size, except that a router-managed DP server
            (``SGLANG_DP_RANK``) prints ``dp_size=1`` and tags its lines ``DP<rank>``.
        enable_mixed_chunk: ``enable_mixed_chunk=True``: a prefill chunk rides in the decode batch and
            its budget is ``chunked_prefill_size`` less the running requests (SGLang's ``PrefillAdder``).
    """

    origin: Origin
    decode_log_interval: int | None = None
    chunked_prefill_size: int | None = None
    max_running_requests: int | None = None
    rank_sizes: dict[str, int] = field(default_factory=dict)
    enable_mixed_chunk: bool = False
    settings: dict[str, str] = field(default_factory=dict, repr=False)


@dataclass(frozen=True, slots=True)
class ReqTimeStats:
    """One per-request time-stats line (``--enable-request-time-stats-logging``).

    Sources: ``Req Time Stats(rid=.., input len=.., output len=.., type=..): queue_duration=Xms, ...``
    (2025-05-12 to 2026-02) and ``ReqTimeStats(rid=.., input_len=.., cached_input_len=..,
    output_len=..[, attempts=N], type=..): queue_duration=Xms, ...`` (2026-05-06+).

    Attributes:
        queue_duration: ``queue_duration`` in seconds (printed in ms).
        input_len / output_len / cached_input_len: token counts where printed.
        attempts: ``attempts=`` (2026-07-12+): 1 + number of retractions of the request.
    """

    origin: Origin
    queue_duration: float
    input_len: int | None = None
    output_len: int | None = None
    cached_input_len: int | None = None
    attempts: int | None = None


# -- SGLang Omni (docs/sglang-omni.md): lines printed only in Omni's own format -----------------


@dataclass(frozen=True, slots=True)
class CudaGraphCapture:
    """``Capture target decode CUDA graph begin. backend=B, num_tokens_per_req=1, bs=[1, 2, ..., 64], avail
    mem=M GB`` (SGLang 0.5.16+, ``cuda_graph_setup.py``; ``Capture cuda graph bs [1, 2, ...]`` before), read
    from SGLang Omni's stage processes only.

    Attributes:
        max_batch_size: The largest ``bs`` captured. Omni never prints ``max_running_requests``; its
            generation batch policy sets ``cuda_graph_max_bs`` to it by default, so this is a proxy of
            the stage's batch ceiling, not the ceiling.
    """

    origin: Origin
    max_batch_size: int


@dataclass(frozen=True, slots=True)
class OmniStartup:
    """A start-up line of SGLang Omni that says which stage is built where. It moves no metric; the
    attribution step (:mod:`exporter.sources.log.attribution`) learns the stages from it.

    Attributes:
        kind: ``ar_startup`` (``sglang_ar_startup stage=X ...``: X is an SGLang-backed stage; Qwen3-Omni,
            MiniCPM-o, Ming), ``building`` (``Building scheduler for X (tp_rank=r/n) ...``), ``lock``
            (``Acquired GPU startup lock for stage X: PATH``: X's scheduler is being built on that GPU),
            ``runtime_config`` (``SGLang runtime configuration: gpu_id=G, ...``: an SGLang scheduler is
            being built), ``process_ready`` (``Process P ready with stages=[...]``), ``pipeline_started``
            (``MultiProcessPipelineRunner started: N stage(s), M process(es)``: every stage is up).
        stage: The stage named (``ar_startup``, ``building``, ``lock``), else ``""``.
        stages: The stages of the process (``process_ready``).
        process: The process name (``process_ready``; the logger ``stage_workers.<P>`` of ``building``).
        gpu: The GPU: the device part of the lock file name (``lock``), ``gpu_id`` (``runtime_config``).
    """

    origin: Origin
    kind: str
    stage: str = ""
    stages: tuple[str, ...] = ()
    process: str = ""
    gpu: str = ""


#: ``reason`` values of :class:`OmniAdmission` rejections (the ``reason`` label).
OMNI_REJECT_REASONS = ("in_flight_cap", "queue_full", "waiting_queue_full", "kv_capacity", "prompt_too_long")


@dataclass(frozen=True, slots=True)
class OmniAdmission:
    """A request admission fact of SGLang Omni.

    Sources: ``Coordinator submitted req=...`` (``submitted``), ``Coordinator aborted req=...``
    (``aborted``); rejections (``rejected``, by ``reason``): ``Rejecting request R before pipeline submit:
    in-flight cap (max_in_flight=N)`` (coordinator: ``in_flight_cap``), ``Rejecting request R before build:
    The request queue is full.`` (``queue_full``), ``Rejecting request R: waiting queue is full
    (max_queued_requests=N, waiting=W)`` (``waiting_queue_full``), ``Rejecting request R before
    scheduling: Request requires more tokens than the ... KV cache can hold`` (``kv_capacity``), and the
    preprocessor's ``rejecting request R: prompt N tokens >= max_seq_len M`` (``prompt_too_long``).
    The request id is never kept.
    """

    origin: Origin
    action: str
    reason: str = ""


@dataclass(frozen=True, slots=True)
class OmniStageEvent:
    """A stage's lifecycle: ``Stage X started`` / ``Stage X stopped`` (``pipeline/stage/runtime.py``),
    ``Scheduler thread for stage X crashed`` (``crashed``), and the coordinator's ``Dead stage process(es)
    detected[ in G]: P (pid=N, exit=C), ...`` (``dead``, ``stage`` empty, ``processes`` counted).
    """

    origin: Origin
    event: str
    stage: str = ""
    processes: int = 0


@dataclass(frozen=True, slots=True)
class OmniInFlightCap:
    """``Coordinator in-flight cap=N (generation running+queued)`` (``mp_runner.py``; TTS configs)."""

    origin: Origin
    cap: int


#: Events of SGLang Omni's pipeline (``sglang_omni_*``), as opposed to a scheduler's.
OMNI_PIPELINE_EVENTS = (OmniAdmission, OmniStageEvent, OmniInFlightCap, OmniStartup)

Event = (PrefillBatch | DecodeBatch | Retraction | RetractAbort | Capacity | KvAllocation | ServerArgs
         | ReqTimeStats | CudaGraphCapture | OmniStartup | OmniAdmission | OmniStageEvent | OmniInFlightCap)
"""Every event type the parser can return."""

#: Line kinds used as the ``kind`` label of ``sglang_exporter_log_lines_total``.
KINDS = ("prefill", "decode", "retraction", "retract_abort", "capacity", "kv_allocation", "server_args",
         "req_time_stats", "omni", "other")

#: Line kind of each event type (``other`` is a line that is no event).
KIND_OF = {
    PrefillBatch: "prefill",
    DecodeBatch: "decode",
    Retraction: "retraction",
    RetractAbort: "retract_abort",
    Capacity: "capacity",
    KvAllocation: "kv_allocation",
    ServerArgs: "server_args",
    ReqTimeStats: "req_time_stats",
    CudaGraphCapture: "omni",
    OmniStartup: "omni",
    OmniAdmission: "omni",
    OmniStageEvent: "omni",
    OmniInFlightCap: "omni",
}

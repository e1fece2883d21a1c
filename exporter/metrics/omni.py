"""``sglang_omni_*`` and ``sglang_exporter_omni_*``: SGLang Omni's own facts (docs/sglang-omni.md).

Two collectors serve them. ``pipeline`` reads SGLang Omni's log through the scheduler store
(:meth:`~exporter.scheduler.pipeline.PipelineState.view`): admissions, rejections by reason, stage
lifecycle, the in-flight cap and each stage's batch-ceiling proxy; its families stay empty for plain
SGLang. ``omni`` reads the optional HTTP source (``--omni.url``, :mod:`exporter.sources.omni`): the
live per-stage snapshot of ``/model_info`` and the pipeline's ``/health``.
"""

from __future__ import annotations

from .defs import COUNTER, GAUGE, MetricDef

_REJECT = ("'Rejecting request R before pipeline submit: in-flight cap' (coordinator: in_flight_cap), "
           "'... before build: The request queue is full.' (queue_full), '...: waiting queue is full (...)' "
           "(waiting_queue_full), '... before scheduling: Request requires more tokens than the ... KV cache "
           "can hold' (kv_capacity), the preprocessor's 'rejecting request R: prompt N tokens >= max_seq_len M' "
           "(prompt_too_long)")
_INFO = "GET /model_info (admin; one result per stage, data of OmniScheduler._admin_model_info)"


def _p(name, type_, labels, unit, read, source, help_) -> MetricDef:
    return MetricDef(name, type_, labels, unit, source, help_, "pipeline", read)


def _o(name, type_, labels, unit, read, source, help_) -> MetricDef:
    return MetricDef(name, type_, labels, unit, source, help_, "omni", read)


PIPELINE_ROWS = (
    _p("sglang_omni_requests_submitted_total", COUNTER, (), "requests", "submitted",
       "'Coordinator submitted req=... to STAGE at ENDPOINT' (coordinator; DEBUG since SGLang Omni 0.1.7)",
       "Requests the SGLang Omni coordinator submitted to the pipeline's entry stage; absent until the first "
       "such line (DEBUG since SGLang Omni 0.1.7: at INFO it never appears, never a false 0)."),
    _p("sglang_omni_requests_aborted_total", COUNTER, (), "requests", "aborted",
       "'Coordinator aborted req=...' (coordinator, INFO)",
       "Requests the SGLang Omni coordinator aborted."),
    _p("sglang_omni_requests_rejected_total", COUNTER, ("stage", "reason"), "requests", "rejected", _REJECT,
       "Requests SGLang Omni rejected, by reason: in_flight_cap (coordinator), queue_full, waiting_queue_full, "
       "kv_capacity (a stage's scheduler), prompt_too_long (preprocessing); stage is empty for the coordinator "
       "and where the line does not say which stage printed it (no logging shim)."),
    _p("sglang_omni_in_flight_cap_requests", GAUGE, (), "requests", "in_flight_cap",
       "'Coordinator in-flight cap=N (generation running+queued)' (start-up, TTS configs)",
       "The coordinator's in-flight cap (the generation stage's running plus queued limits)."),
    _p("sglang_omni_stage_lifecycle_events_total", COUNTER, ("stage", "event"), "events", "lifecycle",
       "'Stage X started', 'Stage X stopped', 'Scheduler thread for stage X crashed' (stage runtime)",
       "Stage lifecycle lines: started, stopped, crashed (the stage's scheduler thread died)."),
    _p("sglang_omni_stage_started", GAUGE, ("stage",), "1", "up",
       "the latest lifecycle line of the stage",
       "1 after the stage's 'Stage X started' line, 0 after it stopped or its scheduler thread crashed."),
    _p("sglang_omni_stage_process_deaths_total", COUNTER, (), "processes", "process_deaths",
       "'Dead stage process(es) detected: P (pid=N, exit=C), ...' (coordinator, ERROR)",
       "Stage processes the SGLang Omni coordinator found dead (the pipeline fails its requests)."),
    _p("sglang_omni_stage_max_running_requests_proxy", GAUGE, ("stage",), "requests", "ceiling_proxy",
       "largest bs of 'Capture target decode CUDA graph begin. ... bs=[...]' (SGLang 0.5.16+) or 'Capture cuda "
       "graph bs [...]' of the stage: a proxy",
       "A PROXY of the stage's batch ceiling: the largest decode CUDA-graph batch size captured. SGLang Omni never "
       "prints max_running_requests; its cuda_graph_max_bs defaults to it, unless configured otherwise."),
)

OMNI_ROWS = (
    _o("sglang_omni_up", GAUGE, (), "1", "up", "GET /health within --omni.timeout, answered 200",
       "1 when SGLang Omni's /health answered 200 within --omni.timeout at the latest poll and that poll is "
       "recent, else 0 (the per-stage snapshot is then withheld)."),
    _o("sglang_omni_pipeline_running", GAUGE, (), "1", "running", "GET /health: running",
       "1 while SGLang Omni's coordinator runs (/health 'running')."),
    _o("sglang_omni_tracked_requests", GAUGE, ("state",), "requests", "request_states",
       "GET /health: request_states",
       "Requests the coordinator tracks, by state (/health 'request_states': pending, running, ...)."),
    _o("sglang_omni_pending_completions", GAUGE, (), "requests", "pending_completions",
       "GET /health: pending_completions",
       "Requests whose completion the coordinator awaits (/health 'pending_completions')."),
    _o("sglang_omni_stage_waiting_requests", GAUGE, ("stage",), "requests", "stages.*.waiting_queue_size",
       f"{_INFO}: waiting_queue_size",
       "Requests in the stage scheduler's waiting queue (/model_info 'waiting_queue_size'), polled."),
    _o("sglang_omni_stage_running_requests", GAUGE, ("stage",), "requests", "stages.*.running_batch_size",
       f"{_INFO}: running_batch_size",
       "Requests in the stage's running batch (/model_info 'running_batch_size'), polled."),
    _o("sglang_omni_stage_request_build_pending", GAUGE, ("stage",), "requests", "stages.*.request_build_pending",
       f"{_INFO}: request_build_pending",
       "Requests whose SGLang request the stage is still building (/model_info 'request_build_pending')."),
    _o("sglang_omni_stage_request_admission_pending", GAUGE, ("stage",), "requests",
       "stages.*.request_admission_pending", f"{_INFO}: request_admission_pending",
       "Built requests waiting for admission into the scheduler (/model_info 'request_admission_pending')."),
    _o("sglang_omni_stage_request_build_backlog", GAUGE, ("stage",), "requests", "stages.*.request_build_backlog",
       f"{_INFO}: request_build_backlog",
       "Requests waiting for a request-build worker (/model_info 'request_build_backlog')."),
    _o("sglang_omni_stage_engine_paused", GAUGE, ("stage",), "1", "stages.*.engine_paused",
       f"{_INFO}: engine_paused",
       "1 while the stage's engine is paused (/pause_generation), else 0."),
    _o("sglang_exporter_omni_polls_total", COUNTER, ("endpoint", "result"), "polls", "polls",
       "the Omni poller (exporter/sources/omni/poller.py)",
       "Polls of SGLang Omni's endpoints (health, model_info) by result: ok, timeout (past --omni.timeout), "
       "unreachable, unauthorized (401/403: check the admin key), http_error, bad_response."),
    _o("sglang_exporter_omni_snapshot_age_seconds", GAUGE, (), "seconds", "snapshot_age",
       "the Omni poller's clock",
       "Seconds since the latest poll of SGLang Omni that answered."),
)

"""exporter/sources/log/omni.py (SGLang Omni's own lines) and the Omni prefix of prefix.py.

Lines are the real 0.5.8-era excerpt of tests/omni/ and lines built from the format strings of Omni's
and SGLang's source (file and line in docs/sglang-omni.md), one per era where the logger moved.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from exporter.events import (
    CudaGraphCapture,
    DecodeBatch,
    KvAllocation,
    OmniAdmission,
    OmniInFlightCap,
    OmniStageEvent,
    OmniStartup,
    PrefillBatch,
    Retraction,
)
from exporter.sources.log.parser import Malformed, parse_line

OMNI = Path(__file__).parent / "omni"
T = "2026-08-20 10:15:01,902"


def test_the_real_0_5_8_era_lines_parse_with_their_trailing_comma_and_omni_prefix():
    decode, prefill = (parse_line(line) for line in (OMNI / "pr712-omni-0.5.8-excerpt.log").read_text().splitlines())
    assert type(decode) is DecodeBatch and (decode.running_req, decode.kv.used_tokens, decode.queue_req) == (1, 227, 0)
    assert decode.gen_throughput == 126.29 and decode.graph is True
    assert type(prefill) is PrefillBatch and (prefill.new_seq, prefill.new_token, prefill.cached_token) == (1, 1, 7)
    for ev in (decode, prefill):  # Omni's stock format: no shim token, no stage yet, time with milliseconds
        assert (ev.origin.task, ev.origin.stage, ev.origin.dp_rank) == ("", "", "0")
    assert prefill.origin.log_time - decode.origin.log_time == pytest.approx(0.184)


@pytest.mark.parametrize("logger", [
    "sglang.srt.managers.scheduler_metrics_mixin",              # 0.5.8 (2026-05 .. 06)
    "sglang.srt.observability.scheduler_metrics_mixin",         # 0.5.12.post1 (2026-06 .. 07)
    "sglang.srt.managers.scheduler_components.metrics_reporter",  # 0.5.16 / 0.5.18 (2026-08 ..)
])
def test_stats_lines_of_every_era_are_read_by_title_not_logger(logger):
    p = parse_line(f"{T} [INFO] {logger}: Prefill batch, #new-seq: 3, #new-token: 5120, #cached-token: 1024, "
                   "token usage: 0.05, #running-req: 9, #queue-req: 2, #pending-token: 3072, cuda graph: False, "
                   "input throughput (token/s): 10234.56")
    assert (p.new_seq, p.pending_token, p.input_throughput) == (3, 3072, 10234.56)
    d = parse_line(f"{T} [INFO] [stage-thinker/scheduler-thinker] {logger}: Decode batch [1200], #running-req: 12, "
                   "#token: 20734, token usage: 0.08, cuda graph: True, gen throughput (token/s): 611.32, #queue-req: 0")
    assert d.running_req == 12 and d.origin.task == "stage-thinker/scheduler-thinker"


def test_the_retraction_warning_and_the_shim_token():
    r = parse_line(f"{T} [WARNING] [stage-talker_ar-tp1-follower/scheduler-talker_ar] sglang.srt.managers.scheduler: "
                   "KV cache pool is full. Retract requests. #retracted_reqs: 2, #new_tokens_gained: 4096, "
                   "#new_token_ratio: 0.4200 -> 0.5500")
    assert type(r) is Retraction and (r.retracted_reqs, r.new_tokens_gained) == (2, 4096)
    assert r.origin.task == "stage-talker_ar-tp1-follower/scheduler-talker_ar"


@pytest.mark.parametrize("line, want", [
    # 0.5.16 memory pool (dtype first) and the older form: SGLang's own line, read by the parser in any format
    (f"{T} [INFO] sglang.srt.mem_cache.memory_pool: KV Cache is allocated. dtype: torch.bfloat16, #tokens: 262144, "
     "K size: 12.00 GB, V size: 12.00 GB", KvAllocation(None, 262144, 24.0 * 2**30)),
    (f"{T} [INFO] sglang.srt.mem_cache.memory_pool: KV Cache is allocated. #tokens: 334289, K size: 24.23 GB, "
     "V size: 24.23 GB", KvAllocation(None, 334289, 48.46 * 2**30)),
    (f"{T} [INFO] sglang.srt.model_executor.model_runner_components.cuda_graph_setup: Capture target decode CUDA "
     "graph begin. backend=full, num_tokens_per_req=1, bs=[1, 2, 4, 8, 12, 16, 24, 32, 40, 48, 56, 64], avail "
     "mem=31.20 GB", CudaGraphCapture(None, 64)),
    (f"{T} [INFO] sglang.srt.model_executor.cuda_graph_runner: Capture cuda graph bs [1, 2, 4, 8, 16, 24, 32]",
     CudaGraphCapture(None, 32)),
    (f"{T} [INFO] sglang_omni.models.qwen3_omni.stages: sglang_ar_startup stage=talker_ar gpu_id=1 tp_rank=0/1 "
     "context_length=8192 mem_fraction_static=0.5 pre_load_avail_mem=80.1 pid=4242",
     OmniStartup(None, "ar_startup", stage="talker_ar")),
    (f"{T} [INFO] stage_workers.thinker_group: Building scheduler for thinker (tp_rank=0/2) ...",
     OmniStartup(None, "building", stage="thinker", process="thinker_group")),
    (f"{T} [INFO] stage_workers.tts: Acquired GPU startup lock for stage tts_engine: /tmp/sglang_omni_gpu_3_startup.lock",
     OmniStartup(None, "lock", stage="tts_engine", gpu="3")),
    (f"{T} [INFO] sglang_omni.scheduling.bootstrap: SGLang runtime configuration: gpu_id=0, sm=90, architecture=hopper, "
     "attention_backend=fa3", OmniStartup(None, "runtime_config", gpu="0")),
    (f"{T} [INFO] stage_workers.encoders: Process encoders ready with stages=['image_encoder', 'audio_encoder']",
     OmniStartup(None, "process_ready", stages=("image_encoder", "audio_encoder"), process="encoders")),
    (f"{T} [INFO] sglang_omni.pipeline.mp_runner: MultiProcessPipelineRunner started: 6 stage(s), 5 process(es)",
     OmniStartup(None, "pipeline_started")),
    (f"{T} [INFO] sglang_omni.pipeline.coordinator: Coordinator submitted req=chatcmpl-7f3a9c to preprocessing at "
     "ipc:///tmp/sglang_omni/qwen3_omni/stage_preprocessing.sock", OmniAdmission(None, "submitted")),
    (f"{T} [INFO] sglang_omni.pipeline.coordinator: Coordinator aborted req=chatcmpl-7f3a9c",
     OmniAdmission(None, "aborted")),
    (f"{T} [WARNING] sglang_omni.pipeline.coordinator: Rejecting request speech-91 before pipeline submit: in-flight "
     "cap (max_in_flight=48)", OmniAdmission(None, "rejected", "in_flight_cap")),
    (f"{T} [WARNING] sglang_omni.scheduling.omni_scheduler: Rejecting request speech-92 before build: The request "
     "queue is full.", OmniAdmission(None, "rejected", "queue_full")),
    (f"{T} [WARNING] sglang_omni.scheduling.omni_scheduler: Rejecting request speech-93: waiting queue is full "
     "(max_queued_requests=16, waiting=16)", OmniAdmission(None, "rejected", "waiting_queue_full")),
    (f"{T} [WARNING] sglang_omni.scheduling.omni_scheduler: Rejecting request chatcmpl-aa01 before scheduling: "
     "Request requires more tokens than the thinker KV cache can hold (input_tokens=30112, max_new_tokens=2048, "
     "required_tokens=32160, kv_capacity=28671). Current mem_fraction_static is 0.750; try setting "
     "--thinker-mem-fraction-static higher.", OmniAdmission(None, "rejected", "kv_capacity")),
    (f"{T} [INFO] sglang_omni.models.qwen3_omni.components.preprocessor: rejecting request chatcmpl-aa02: prompt "
     "9001 tokens >= max_seq_len 8192", OmniAdmission(None, "rejected", "prompt_too_long")),
    (f"{T} [INFO] sglang_omni.models.qwen3_omni.components.preprocessor: rejecting request chatcmpl-aa03: prompt "
     "8000 + max_new_tokens 512 = 8512 tokens >= max_seq_len 8192", OmniAdmission(None, "rejected", "prompt_too_long")),
    (f"{T} [INFO] sglang_omni.pipeline.stage.runtime: Stage thinker started", OmniStageEvent(None, "started", "thinker")),
    (f"{T} [INFO] sglang_omni.pipeline.stage.runtime: Stage code2wav stopped", OmniStageEvent(None, "stopped", "code2wav")),
    (f"{T} [ERROR] sglang_omni.pipeline.stage.runtime: Scheduler thread for stage talker_ar crashed",
     OmniStageEvent(None, "crashed", "talker_ar")),
    (f"{T} [ERROR] sglang_omni.pipeline.mp_runner: Dead stage process(es) detected: thinker (pid=41234, exit=-9), "
     "talker (pid=41235, exit=-9)", OmniStageEvent(None, "dead", processes=2)),
    (f"{T} [INFO] sglang_omni.pipeline.mp_runner: Coordinator in-flight cap=48 (generation running+queued)",
     OmniInFlightCap(None, 48)),
])
def test_omnis_own_lines(line, want):
    ev = parse_line(line)
    assert type(ev) is type(want)
    got = {f: getattr(ev, f) for f in ev.__slots__ if f != "origin"}
    expected = {f: getattr(want, f) for f in want.__slots__ if f != "origin"}
    if "size_bytes" in got:
        assert got.pop("size_bytes") == pytest.approx(expected.pop("size_bytes"))
    assert got == expected
    assert ev.origin.task == "" and ev.origin.log_time is not None


def test_omnis_own_lines_are_read_in_omnis_format_only():
    """Plain SGLang prints the CUDA-graph line too: in its own format it is left as it was (ignored), so a
    plain SGLang log gives exactly what it gave before."""
    for line in ("[2026-09-13 16:05:20] Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1, "
                 "bs=[1, 2, 4, 8, 12, 16, 24], avail mem=2.04 GB",
                 "2026-08-20 10:15:01.902 [INFO] x: Stage thinker started",       # a period, not Omni's comma
                 "2026-08-20 10:15:01,902 INFO x: Stage thinker started",          # no bracketed level
                 "Stage thinker started"):
        assert parse_line(line) is None, line


def test_a_logged_request_cannot_forge_an_omni_line():
    """Only the message right after Omni's prefix counts: a request text that holds such a line does not."""
    forged = (f"{T} [INFO] sglang_omni.serve.openai_api: request text='x {T} [INFO] sglang_omni.pipeline.stage.runtime: "
              "Stage thinker started'")
    assert parse_line(forged) is None


@pytest.mark.parametrize("line", [
    f"{T} [INFO] x.cuda_graph_setup: Capture target decode CUDA graph begin. backend=full, bs=[], avail mem=1 GB",
    f"{T} [INFO] x.cuda_graph_setup: Capture target decode CUDA graph begin. backend=full, bs=[1, two], avail mem=1 GB",
    f"{T} [INFO] sglang_omni.models.qwen3_omni.stages: sglang_ar_startup stage=th}}in{{ker gpu_id=0",
    f"{T} [INFO] sglang_omni.pipeline.mp_runner: Coordinator in-flight cap=many (generation running+queued)",
])
def test_damaged_omni_lines_are_malformed_and_name_no_label(line):
    ev = parse_line(line)
    assert type(ev) is Malformed and ev.kind == "omni"


def test_the_prefix_reads_the_shim_token_only_in_omnis_format():
    for prefix, task in ((f"{T} [INFO] [stage-thinker/scheduler-thinker] sglang.srt.x: ", "stage-thinker/scheduler-thinker"),
                         (f"{T} [INFO] [process-encoders/MainThread] sglang.srt.x: ", "process-encoders/MainThread"),
                         (f"{T} [INFO] sglang.srt.x: ", ""),
                         (f"2026-08-20T10:15:01.123456789Z stderr F {T} [WARNING] sglang.srt.x: ", ""),  # CRI wrapper
                         ("[2026-08-20 10:15:01 DP1 TP3] ", None),
                         ("2026-08-20 10:15:01,902 INFO 123 [scheduler.py:88] ", None)):
        ev = parse_line(prefix + "Decode batch, #running-req: 1, #token: 2, token usage: 0.00, #queue-req: 0")
        assert ev.origin.task == task, prefix

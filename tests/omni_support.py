"""A simulated SGLang Omni server: the process tree, the logging set-up and the lines of the real one.

What is faithful to SGLang Omni ``main`` (2026-08, docs/sglang-omni.md, checked against its source):

* Stage processes are started with ``multiprocessing.get_context("spawn")`` and named like Omni names
  them (``pipeline/stage_workers.py``, ``_process_name``): ``stage-<stage>``.
* A spawned child imports the module of its target; Omni's profiler modules, imported on that path,
  call ``logging.basicConfig(level=INFO, format="%(asctime)s [%(levelname)s] %(name)s: %(message)s")``
  at import time. This module does the same at import, and its target then calls
  ``logging.basicConfig(level=INFO, stream=sys.stdout)`` as ``stage_process_main`` does (a no-op:
  the root logger has a handler already), so the lines go to stderr in Omni's format.
* Start-up lines come from the process's main thread (``sglang_ar_startup``, ``KV Cache is allocated``,
  the decode CUDA-graph capture, ``Stage X started``); SGLang's stats and retraction lines from a thread
  named ``scheduler-<stage>`` (``pipeline/stage/runtime.py``), with the logger names of SGLang 0.5.16.
* The parent waits until every stage is ready before any request runs (``MultiProcessPipelineRunner``
  waits for every process's ready event), then logs as the coordinator does.

Run ``python -m omni_support STAGE...`` with ``tests`` on ``PYTHONPATH`` (and ``deploy/sglang-omni``
for the shim), its stderr a file opened for appending: every process writes to that descriptor, so
the lines of the processes interleave in one file as in a container's log.
"""

from __future__ import annotations

import logging
import multiprocessing
import sys
import threading
import time

logging.basicConfig(level=logging.INFO, format="%(asctime)s [%(levelname)s] %(name)s: %(message)s")

REPORTER = "sglang.srt.managers.scheduler_components.metrics_reporter"

#: What each simulated stage prints: its KV pool, its CUDA-graph batch sizes, and its scheduler's
#: lines (``prefill`` Prefill lines of ``new_seq`` requests, ``decode`` Decode lines of ``running``
#: requests, ``retractions`` retraction lines of one request each).
STAGES = {
    "thinker": {"kv_tokens": 262144, "graph_bs": [1, 2, 4, 8, 16, 24, 32, 48, 64], "prefill": 4, "new_seq": 2,
                "decode": 3, "running": 8, "kv_used": 4000, "retractions": 1},
    "talker_ar": {"kv_tokens": 65536, "graph_bs": [1, 2, 4, 8, 16, 32], "prefill": 2, "new_seq": 1,
                  "decode": 5, "running": 3, "kv_used": 900, "retractions": 2},
}
PAUSE = 0.01


def scheduler_lines(stage: str) -> int:
    """Scheduler lines (Prefill, Decode, retraction) the stage prints."""
    s = STAGES[stage]
    return s["prefill"] + s["decode"] + s["retractions"]


def _scheduler_loop(stage: str) -> None:
    """The stage's scheduler thread: SGLang's stats and retraction lines, the kinds interleaved."""
    s = STAGES[stage]
    reporter, scheduler = logging.getLogger(REPORTER), logging.getLogger("sglang.srt.managers.scheduler")
    usage = s["kv_used"] / s["kv_tokens"]
    left = {"prefill": s["prefill"], "decode": s["decode"], "retraction": s["retractions"]}
    while any(left.values()):
        for kind in left:
            if not left[kind]:
                continue
            left[kind] -= 1
            if kind == "prefill":
                reporter.info("Prefill batch, #new-seq: %d, #new-token: 512, #cached-token: 0, token usage: %.2f, "
                              "#running-req: %d, #queue-req: 1, #pending-token: 0, cuda graph: False, input "
                              "throughput (token/s): 1000.00", s["new_seq"], usage, s["running"])
            elif kind == "decode":
                reporter.info("Decode batch, #running-req: %d, #token: %d, token usage: %.2f, cuda graph: True, "
                              "gen throughput (token/s): 500.00, #queue-req: 0", s["running"], s["kv_used"], usage)
            else:
                scheduler.warning("KV cache pool is full. Retract requests. #retracted_reqs: 1, "
                                  "#new_tokens_gained: 256, #new_token_ratio: 0.4000 -> 0.5000")
            time.sleep(PAUSE)


def stage_process_main(stage: str, ready, go) -> None:
    """A stage process: its start-up lines from the main thread, then its scheduler thread."""
    logging.basicConfig(level=logging.INFO, stream=sys.stdout)  # as Omni's stage_process_main: a no-op here
    s = STAGES[stage]
    logging.getLogger("sglang_omni.models.qwen3_omni.stages").info(
        "sglang_ar_startup stage=%s gpu_id=0 tp_rank=0/1 context_length=8192 total_gpu_memory_fraction=None "
        "mem_fraction_static=0.75 pre_load_avail_mem=138.5 pid=%d pre_load_process_mem=0.52GiB",
        stage, multiprocessing.current_process().pid)
    logging.getLogger("sglang.srt.mem_cache.memory_pool").info(
        "KV Cache is allocated. dtype: torch.bfloat16, #tokens: %d, K size: 12.00 GB, V size: 12.00 GB",
        s["kv_tokens"])
    logging.getLogger("sglang.srt.model_executor.model_runner_components.cuda_graph_setup").info(
        "Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1, bs=%s, avail mem=31.20 GB",
        s["graph_bs"])
    thread = threading.Thread(target=_wait_and_schedule, args=(stage, go), name=f"scheduler-{stage}", daemon=True)
    thread.start()
    logging.getLogger("sglang_omni.pipeline.stage.runtime").info("Stage %s started", stage)
    ready.set()
    thread.join(30)


def _wait_and_schedule(stage: str, go) -> None:
    go.wait(30)
    _scheduler_loop(stage)


def main(stages: list[str]) -> None:
    """The Omni main process: spawn the stages, wait until each is ready, let requests in."""
    ctx = multiprocessing.get_context("spawn")
    go = ctx.Event()
    procs = []
    for stage in stages:
        ready = ctx.Event()
        proc = ctx.Process(target=stage_process_main, args=(stage, ready, go), name=f"stage-{stage}", daemon=True)
        proc.start()
        procs.append((proc, ready))
    for _, ready in procs:
        if not ready.wait(60):
            raise SystemExit("a stage did not become ready")
    runner = logging.getLogger("sglang_omni.pipeline.mp_runner")
    runner.info("Coordinator in-flight cap=48 (generation running+queued)")
    runner.info("MultiProcessPipelineRunner started: %d stage(s), %d process(es)", len(stages), len(stages))
    coordinator = logging.getLogger("sglang_omni.pipeline.coordinator")
    coordinator.info("Coordinator submitted req=chatcmpl-1 to preprocessing at ipc:///tmp/omni/stage.sock bindings={}")
    go.set()
    for proc, _ in procs:
        proc.join(60)


if __name__ == "__main__":
    main(sys.argv[1:])

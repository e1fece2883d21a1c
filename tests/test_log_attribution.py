"""exporter/sources/log/attribution.py: which SGLang Omni stage printed a line.

Process and thread names are Omni's (``pipeline/stage_workers.py`` ``_process_name``,
``pipeline/stage/runtime.py``'s ``scheduler-<stage>`` thread); start-up lines are built from Omni's
format strings (docs/sglang-omni.md).
"""

from __future__ import annotations

from pathlib import Path

from conftest import value
from exporter_support import Exporter

from exporter.events import CudaGraphCapture, DecodeBatch, KvAllocation, OmniAdmission, OmniStartup, Retraction
from exporter.sources.log.attribution import MAX_KNOWN, MAX_PROCESS_STAGES, StageAttribution
from exporter.sources.log.parser import parse_line

T = "2026-08-20 10:15:01,902"
DECODE = ("sglang.srt.managers.scheduler_components.metrics_reporter: Decode batch, #running-req: 4, #token: 90, "
          "token usage: 0.01, cuda graph: True, gen throughput (token/s): 100.00, #queue-req: 0")
RETRACT = ("sglang.srt.managers.scheduler: KV cache pool is full. Retract requests. #retracted_reqs: 1, "
           "#new_tokens_gained: 10, #new_token_ratio: 0.4000 -> 0.5000")
KV = "sglang.srt.mem_cache.memory_pool: KV Cache is allocated. #tokens: 4096, K size: 1.00 GB, V size: 1.00 GB"


def line(message: str, task: str = "", level: str = "INFO") -> str:
    return f"{T} [{level}] " + (f"[{task}] " if task else "") + message


def startup(stage: str, task: str = "") -> str:
    return line(f"sglang_omni.models.qwen3_omni.stages: sglang_ar_startup stage={stage} gpu_id=0 tp_rank=0/1", task)


def run(att: StageAttribution, *lines: str):
    events = [parse_line(x) for x in lines]
    assert all(e is not None and type(e).__name__ != "Malformed" for e in events), lines
    return att.attribute(events)


def stages_of(events) -> list[tuple[str, str]]:
    return [(e.origin.stage, e.origin.replica) for e in events if type(e) in (DecodeBatch, Retraction,
                                                                              KvAllocation, CudaGraphCapture)]


def test_plain_sglang_lines_pass_untouched():
    att = StageAttribution()
    ev = parse_line("[2026-07-21 10:00:00 DP3 TP3] Decode batch, #running-req: 4, #token: 90, token usage: 0.01, "
                    "#queue-req: 0")
    kept, dropped = att.attribute([ev])
    assert kept == [ev] and kept[0] is ev and dropped == []


def test_the_shims_thread_names_the_stage_and_a_tp_follower_is_a_replica():
    att = StageAttribution()
    kept, dropped = run(att, line(DECODE, "stage-thinker/scheduler-thinker"),
                        line(DECODE, "stage-talker_ar/scheduler-talker_ar"),
                        line(RETRACT, "stage-thinker-leader/scheduler-thinker", "WARNING"),
                        line(RETRACT, "stage-thinker-tp3-follower/scheduler-thinker", "WARNING"),
                        line(KV, "stage-talker_ar/MainThread"))
    assert dropped == []
    assert stages_of(kept) == [("thinker", ""), ("talker_ar", ""), ("thinker", "TP0"), ("thinker", "TP3"),
                               ("talker_ar", "")]
    assert att.sglang_stages == {"thinker", "talker_ar"}


def test_a_process_of_several_stages_names_the_stage_it_is_building():
    att = StageAttribution()
    kept, dropped = run(
        att,
        line("stage_workers.g: Process g ready with stages=['thinker', 'image_encoder']", "process-g/MainThread"),
        line("stage_workers.g: Building scheduler for image_encoder (tp_rank=0/1) ...", "process-g/MainThread"),
        line("stage_workers.g: Building scheduler for thinker (tp_rank=0/1) ...", "process-g/MainThread"),
        line(KV, "process-g/MainThread"),
        line(DECODE, "process-g/scheduler-thinker"))
    assert stages_of(kept) == [("thinker", ""), ("thinker", "")] and dropped == []
    other = StageAttribution()
    other.process_stages["h"] = ("a", "b")
    _, dropped = run(other, line(KV, "process-h/MainThread"))
    assert [r for _, r in dropped] == ["colocated"]
    _, dropped = run(other, line(DECODE, "MainProcess/MainThread"))
    assert [r for _, r in dropped] == ["no_stage"]


def test_one_sglang_stage_without_the_shim_is_named_by_its_start_up_line():
    att = StageAttribution()
    kept, dropped = run(att, startup("thinker"), line(KV), line(DECODE), line(RETRACT, level="WARNING"))
    assert stages_of(kept) == [("thinker", "")] * 3 and dropped == []


def test_a_tts_engine_without_sglang_ar_startup_is_named_by_the_gpu_lock_it_held():
    """TTS builders print no sglang_ar_startup: the stage whose start-up lock was held on that GPU when
    SGLang printed its runtime configuration is the SGLang-backed one (a lock of another stage on the
    same GPU before it does not count: the lock is held by one stage at a time)."""
    att = StageAttribution()
    lock = "stage_workers.{s}: Acquired GPU startup lock for stage {s}: /tmp/sglang_omni_gpu_0_startup.lock"
    kept, dropped = run(att, line(lock.format(s="vocoder")), line(lock.format(s="tts_engine")),
                        line("sglang_omni.scheduling.bootstrap: SGLang runtime configuration: gpu_id=0, sm=90"),
                        line(KV), line(DECODE))
    assert att.sglang_stages == {"tts_engine"}
    assert stages_of(kept) == [("tts_engine", "")] * 2 and dropped == []
    runtime = [e for e in kept if type(e) is OmniStartup and e.kind == "runtime_config"]
    assert runtime[0].stage == "tts_engine"


def test_a_runtime_line_that_could_be_two_stages_leaves_every_line_unattributed():
    att = StageAttribution()
    run(att, line("stage_workers.a: Acquired GPU startup lock for stage a: /tmp/sglang_omni_gpu_0_startup.lock"),
        line("stage_workers.b: Acquired GPU startup lock for stage b: /tmp/sglang_omni_gpu_1_startup.lock"),
        line("sglang_omni.scheduling.bootstrap: SGLang runtime configuration: gpu_id=2, sm=90"))
    kept, dropped = run(att, line(DECODE))
    assert stages_of(kept) == [] and [r for _, r in dropped] == ["ambiguous"]


def test_two_stages_without_the_shim_merge_nothing_and_warn_once():
    warnings: list[str] = []
    att = StageAttribution(warn=warnings.append)
    kept, dropped = run(att, startup("thinker"), line(KV), startup("talker_ar"), line(KV),
                        line("sglang_omni.pipeline.mp_runner: MultiProcessPipelineRunner started: 2 stage(s), 2 process(es)"),
                        line(DECODE), line(DECODE), line(RETRACT, level="WARNING"))
    assert stages_of(kept) == []
    assert [type(e).__name__ for e, _ in dropped] == ["KvAllocation", "KvAllocation", "DecodeBatch",
                                                      "DecodeBatch", "Retraction"]
    assert {r for _, r in dropped} == {"several_stages"} and att.unattributed == {"several_stages": 5}
    assert len(warnings) == 1 and "2 SGLang-backed stages (talker_ar, thinker)" in warnings[0]
    assert "deploy/sglang-omni/sitecustomize.py" in warnings[0]


def test_the_first_stage_to_start_is_not_taken_for_the_only_one():
    """Start-up lines that need a stage wait until every stage has started: here the thinker's KV line
    comes before the talker's start-up line, and must not be given to the thinker."""
    att = StageAttribution(warn=lambda _: None)
    kept, dropped = run(att, startup("thinker"), line(KV), line(
        "sglang.srt.model_executor.model_runner_components.cuda_graph_setup: Capture target decode CUDA graph "
        "begin. backend=full, num_tokens_per_req=1, bs=[1, 2, 4], avail mem=1.00 GB"))
    assert (stages_of(kept), dropped) == ([], [])  # held
    kept, dropped = run(att, startup("talker_ar"), line(DECODE))
    assert stages_of(kept) == [] and len(dropped) == 3
    one = StageAttribution()
    run(one, startup("thinker"), line(KV))
    kept, dropped = one.finish()  # the end of a recorded log decides with what it read
    assert stages_of(kept) == [("thinker", "")] and dropped == []


def test_a_restart_with_other_stages_learns_them_afresh():
    """The server restarts, appending to the same log, with another single SGLang-backed stage (or
    after a start-up that left a doubt): its lines are its stage's. Before, the previous run's stages
    stayed known and every line of the new run was unattributed ("runs 2 SGLang-backed stages")."""
    started = line("sglang_omni.pipeline.mp_runner: MultiProcessPipelineRunner started: 1 stage(s), 1 process(es)")
    att = StageAttribution(warn=lambda _: None)
    kept, dropped = run(att, startup("thinker"), line(KV), started, line(DECODE))
    assert stages_of(kept) == [("thinker", "")] * 2 and dropped == []
    kept, dropped = run(att, startup("talker_ar"), line(KV), started, line(DECODE), line(RETRACT, level="WARNING"))
    assert stages_of(kept) == [("talker_ar", "")] * 3 and dropped == []
    assert att.sglang_stages == {"talker_ar"}
    doubt = StageAttribution(warn=lambda _: None)
    run(doubt, line("stage_workers.a: Acquired GPU startup lock for stage a: /tmp/sglang_omni_gpu_0_startup.lock"),
        line("stage_workers.b: Acquired GPU startup lock for stage b: /tmp/sglang_omni_gpu_1_startup.lock"),
        line("sglang_omni.scheduling.bootstrap: SGLang runtime configuration: gpu_id=2, sm=90"), started)
    assert [r for _, r in run(doubt, line(DECODE))[1]] == ["ambiguous"]
    kept, dropped = run(doubt, startup("thinker"), started, line(DECODE))
    assert stages_of(kept) == [("thinker", "")] and dropped == []
    same = StageAttribution(warn=lambda _: None)  # a restart with the same stage: nothing changes
    run(same, startup("thinker"), started, line(DECODE))
    kept, dropped = run(same, startup("thinker"), line(KV), started, line(DECODE))
    assert stages_of(kept) == [("thinker", "")] * 2 and dropped == []


def test_no_start_up_line_no_stage():
    att = StageAttribution(warn=lambda _: None)
    kept, dropped = run(att, line(DECODE))
    assert stages_of(kept) == [] and [r for _, r in dropped] == ["unknown_stages"]


def test_pipeline_facts_are_never_dropped():
    att = StageAttribution(warn=lambda _: None)
    run(att, startup("thinker"), startup("talker_ar"))
    kept, dropped = run(att, line("sglang_omni.pipeline.coordinator: Coordinator submitted req=r1 to preprocessing at x"),
                        line("sglang_omni.scheduling.omni_scheduler: Rejecting request r2: waiting queue is full "
                             "(max_queued_requests=16, waiting=16)", level="WARNING"),
                        line("sglang_omni.scheduling.omni_scheduler: Rejecting request r3: waiting queue is full "
                             "(max_queued_requests=16, waiting=16)", "stage-talker_ar/scheduler-talker_ar", "WARNING"))
    admissions = [e for e in kept if type(e) is OmniAdmission]
    assert [(e.action, e.origin.stage) for e in admissions] == [("submitted", ""), ("rejected", ""),
                                                                ("rejected", "talker_ar")]
    assert dropped == []


def test_what_is_learnt_is_bounded_whatever_the_names():
    """Start-up lines with ever-new process, stage and GPU names, and a process with a huge stage
    list: the oldest are forgotten, the list is cut (all of it was kept, for ever)."""
    att = StageAttribution()
    many = ", ".join(f"'s{j}'" for j in range(5000))
    lines = [line(f"stage_workers.big: Process big ready with stages=[{many}]", "process-big/MainThread")]
    for i in range(3 * MAX_KNOWN):
        lines += [line(f"stage_workers.p{i}: Process p{i} ready with stages=['a{i}', 'b{i}']", f"process-p{i}/MainThread"),
                  line(f"stage_workers.p{i}: Building scheduler for a{i} (tp_rank=0/1) ...", f"process-p{i}/MainThread"),
                  line(DECODE, f"stage-n{i}/scheduler-n{i}")]
    run(att, *lines)
    assert len(att.process_stages) <= MAX_KNOWN and "big" not in att.process_stages
    assert all(len(stages) <= MAX_PROCESS_STAGES for stages in att.process_stages.values())
    assert len(att.sglang_stages) <= MAX_KNOWN and len(att._building) <= MAX_KNOWN
    assert att.process_stages[f"p{3 * MAX_KNOWN - 1}"] == (f"a{3 * MAX_KNOWN - 1}", f"b{3 * MAX_KNOWN - 1}")


def test_the_real_command_stays_small_on_huge_stage_lists(tmp_path):
    """20 lines of 900 kB ``stages=[...]`` (151 MiB peak before; 324 MiB at 1 MB each)."""
    log = tmp_path / "omni.log"
    with open(log, "w") as f:
        for i in range(20):
            names = ", ".join(f"'s{i}_{j}'" for j in range(900_000 // 12))
            f.write(line(f"stage_workers.p{i}: Process p{i} ready with stages=[{names}]", f"process-p{i}/MainThread")
                    + "\n")
    exp = Exporter("--log.path", str(log), "--log.from-beginning", "--gpu.enabled", "false")
    try:
        exp.wait_for(lambda m: value(m, "sglang_exporter_log_lines_total", kind="omni", result="parsed") == 20,
                     "the 20 lines")
        status = Path(f"/proc/{exp.proc.pid}/status").read_text()
        peak = int(next(x for x in status.splitlines() if x.startswith("VmHWM:")).split()[1]) * 1024
        assert peak < 100 << 20, f"peak RSS {peak / (1 << 20):.1f} MiB"
    finally:
        assert exp.terminate() == 0

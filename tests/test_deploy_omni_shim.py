"""deploy/sglang-omni/sitecustomize.py, and the exporter following a simulated SGLang Omni server live.

The server is tests/omni_support.py: stage processes spawned and named as Omni names them, Omni's
logging set-up (``basicConfig`` at import in the child), SGLang's lines from each stage's scheduler
thread, every process writing into one file. The real command follows that file while the processes
write it, with and without the shim (issue 13's Done-when cases).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from conftest import ROOT, value
from exporter_support import Exporter
from omni_support import STAGES, scheduler_lines

SHIM = ROOT / "deploy" / "sglang-omni"
TESTS = ROOT / "tests"


def simulate(log: Path, stages: list[str], shim: bool) -> str:
    """Run the simulated Omni server with its stderr appended to ``log``; returns the file's text."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = os.pathsep.join(([str(SHIM)] if shim else []) + [str(TESTS)])
    with open(log, "ab") as out:
        subprocess.run([sys.executable, "-m", "omni_support", *stages], stdout=out, stderr=out, env=env,
                       check=True, timeout=120, cwd=TESTS)
    return log.read_text()


@contextmanager
def following(tmp_path: Path, stages: list[str], shim: bool) -> Iterator[Exporter]:
    """The real command following a log file while the simulated server writes it (started on the
    empty file, so every line is read live)."""
    log = tmp_path / "omni.log"
    log.touch()
    exp = Exporter("--log.path", str(log), "--gpu.enabled", "false")
    try:
        simulate(log, stages, shim)
        yield exp
    finally:
        exp.terminate()


def _stage(m: dict, name: str, stage: str, **labels) -> float | None:
    return value(m, name, stage=stage, dp_rank="0", **labels)


def _scheduler_series(m: dict) -> set[tuple[str, tuple]]:
    return {k for k in m if k[0].startswith("sglang_scheduler_")}


def test_the_shim_names_process_and_thread_in_omnis_format_and_nothing_else(tmp_path):
    text = simulate(tmp_path / "omni.log", ["thinker"], shim=True)
    scheduler = [line for line in text.splitlines() if "Decode batch" in line]
    assert scheduler and all(" [INFO] [stage-thinker/scheduler-thinker] sglang.srt." in line for line in scheduler)
    assert " [INFO] [stage-thinker/MainThread] sglang.srt.mem_cache.memory_pool: KV Cache" in text
    assert " [INFO] [MainProcess/MainThread] sglang_omni.pipeline.coordinator: " in text
    plain = simulate(tmp_path / "stock.log", ["thinker"], shim=False)
    assert "[stage-" not in plain and " [INFO] sglang.srt.managers.scheduler_components.metrics_reporter: " in plain


def test_the_shim_leaves_other_formats_levels_and_a_shadowed_sitecustomize_alone(tmp_path):
    other = tmp_path / "distro"
    other.mkdir()
    (other / "sitecustomize.py").write_text("import os\nos.environ['CHAINED'] = 'yes'\n")
    code = ("import logging, os, sys\n"
            "logging.basicConfig(level=logging.WARNING, format='%(levelname)s|%(message)s')\n"
            "logging.getLogger('x').info('hidden')\n"
            "logging.getLogger('x').warning('shown')\n"
            "logging.root.handlers[0].setFormatter(logging.Formatter('%(name)s %(message)s'))\n"
            "print(os.environ.get('CHAINED'), logging.basicConfig.__wrapped__.__module__)\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SHIM), str(other)])}
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stderr == "WARNING|shown\n"  # no %(name)s in that format: untouched; the level kept
    assert r.stdout.split() == ["yes", "logging"]


def test_two_stages_through_the_shim_each_stage_its_own_batches_retractions_and_gauges(tmp_path):
    def done(m: dict) -> bool:  # the scheduler series themselves (a scrape reads the log's counts after them)
        return all(_stage(m, "sglang_scheduler_batches_total", stage, phase="decode") == s["decode"] * 40
                   and _stage(m, "sglang_scheduler_retractions_total", stage) == s["retractions"]
                   and _stage(m, "sglang_scheduler_batches_total", stage, phase="prefill") == s["prefill"]
                   for stage, s in STAGES.items())

    with following(tmp_path, ["thinker", "talker_ar"], shim=True) as exp:
        m = exp.wait_for(done, "every stage's scheduler lines")
        m = exp.wait_for(lambda m: sum(value(m, "sglang_exporter_log_lines_total", kind=k, result="parsed") or 0
                                       for k in ("prefill", "decode", "retraction"))
                         == sum(scheduler_lines(s) for s in STAGES), "every scheduler line counted")
        m = exp.metrics()  # everything read is applied by now: one scrape of all of it
    for stage, s in STAGES.items():
        assert _stage(m, "sglang_scheduler_batches_total", stage, phase="prefill") == s["prefill"]
        assert _stage(m, "sglang_scheduler_batches_total", stage, phase="decode") == s["decode"] * 40
        assert _stage(m, "sglang_scheduler_batch_size_sum", stage, phase="prefill") == s["prefill"] * s["new_seq"]
        assert _stage(m, "sglang_scheduler_retractions_total", stage) == s["retractions"]
        assert _stage(m, "sglang_scheduler_running_requests", stage) == s["running"]
        # the gauge is of the latest stats line (absent after a Prefill line, which prints no #token);
        # the Decode lines' KV footprint is counted whatever the order of the lines
        assert _stage(m, "sglang_scheduler_kv_used_tokens", stage) in (s["kv_used"], None)
        assert _stage(m, "sglang_scheduler_decode_kv_tokens_total", stage) == s["decode"] * s["kv_used"]
        assert _stage(m, "sglang_scheduler_decode_kv_requests_total", stage) == s["decode"] * s["running"]
        assert _stage(m, "sglang_scheduler_max_total_tokens", stage) == s["kv_tokens"]
        assert value(m, "sglang_omni_stage_max_running_requests_proxy", stage=stage) == max(s["graph_bs"])
        assert value(m, "sglang_omni_stage_started", stage=stage) == 1
    assert {dict(k[1])["stage"] for k in _scheduler_series(m)} == set(STAGES)  # no merged or unnamed one
    assert value(m, "sglang_omni_requests_submitted_total") == 1
    assert sum(v for k, v in m.items() if k[0] == "sglang_exporter_log_lines_total"
               and dict(k[1])["result"] in ("unattributed", "malformed")) == 0


def test_one_stage_without_the_shim_is_labelled_from_its_start_up_line(tmp_path):
    s = STAGES["talker_ar"]
    with following(tmp_path, ["talker_ar"], shim=False) as exp:
        m = exp.wait_for(lambda m: (_stage(m, "sglang_scheduler_retractions_total", "talker_ar") or 0)
                         == s["retractions"] and (_stage(m, "sglang_scheduler_batches_total", "talker_ar",
                                                         phase="decode") or 0) == s["decode"] * 40, "the stage's lines")
        m = exp.metrics()
    assert _stage(m, "sglang_scheduler_batches_total", "talker_ar", phase="prefill") == s["prefill"]
    assert _stage(m, "sglang_scheduler_max_total_tokens", "talker_ar") == s["kv_tokens"]
    assert {dict(k[1])["stage"] for k in _scheduler_series(m)} == {"talker_ar"}


def test_two_stages_without_the_shim_merge_nothing_and_say_so(tmp_path):
    stats = sum(scheduler_lines(s) for s in STAGES)
    with following(tmp_path, ["thinker", "talker_ar"], shim=False) as exp:
        m = exp.wait_for(lambda m: sum(value(m, "sglang_exporter_log_lines_total", kind=k, result="unattributed") or 0
                                       for k in ("prefill", "decode", "retraction")) == stats, "every scheduler line")
        m = exp.metrics()  # everything read is applied by now: one scrape of all of it
        deadline = time.monotonic() + 10  # the exporter's stderr is read by another thread
        while not (warnings := [x for x in exp.stderr_lines if "do not say which stage printed them" in x]):
            assert time.monotonic() < deadline, "no warning"
            time.sleep(0.05)
    assert _scheduler_series(m) == set()  # no stage's metrics, and no merged scheduler either
    # each stage's KV and CUDA-graph lines are no stage's either; the pipeline's own facts still count
    assert value(m, "sglang_exporter_log_lines_total", kind="kv_allocation", result="unattributed") == len(STAGES)
    assert value(m, "sglang_exporter_log_lines_total", kind="omni", result="unattributed") == len(STAGES)
    assert value(m, "sglang_omni_requests_submitted_total") == 1
    assert value(m, "sglang_omni_stage_started", stage="thinker") == 1
    assert len(warnings) == 1 and "sitecustomize.py" in warnings[0] and "(talker_ar, thinker)" in warnings[0]

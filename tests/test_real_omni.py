"""The exporter against a real SGLang Omni 0.1.9 pipeline (the test bed's ``omni-0.1.9`` stack,
``docs/testbed.md``): the tiny Qwen3-Omni served by ``sgl-omni serve`` on the CPU, seven stages, two
of them (``thinker``, ``talker_ar``) running SGLang's own scheduler; text requests with and without
audio out. The sidecar follows the log while the pipeline writes it and polls Omni's ``/model_info``;
it is scraped right after each of the test bed's own ``/model_info`` polls; ``--one-shot`` and
``report`` then read the finished log.

Each figure is checked against a hand count from the finished log (each stage's lines, named by the
logging shim's ``[stage-<stage>/scheduler-<stage>]``), against what was sent, and against Omni's own
``/model_info`` at the same moments. Two pipeline starts (about 2-4 minutes each on two cores): one
with the shim, one without, where the documented outcome must hold (docs/sglang-omni.md: with two
SGLang-backed stages no line is given to a stage). Without the built stack the tests skip locally
and fail under ``CI=true``.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections import Counter
from dataclasses import dataclass, field

import pytest
from conftest import samples
from exporter_support import Exporter, command
from realserver_support import read_to_end, records_root, require_stack, series

from testbed import omni, stack
from testbed.server import free_port

STAGES = ("thinker", "talker_ar")
#: Each stage's decode log interval as the test bed starts it (omni.BASE_FLAGS), given to the sidecar.
INTERVALS = "thinker=1,talker_ar=1"
LOAD = omni.OmniLoad(n=16, concurrency=4, audio_every=2, talker_tokens=48)
DEADLINE = 60.0
def model_info_stage(body: dict, stage: str) -> dict:
    """One stage's ``data`` in a ``/model_info`` answer."""
    return next(r["data"] for r in body["results"] if r.get("stage") == stage)


@dataclass
class OmniLive:
    run: omni.OmniRun
    pairs: list = field(default_factory=list)   # (/model_info poll record, sidecar /metrics right after)
    final: str = ""
    one_shot: str = ""
    one_shot_default: str = ""   # --one-shot without the stages' intervals
    one_shot_default_err: str = ""
    report: dict = field(default_factory=dict)
    sidecar_log: str = ""
    hand: omni.HandCount = field(default_factory=omni.HandCount)


def _polls_ok(text: str) -> float:
    return sum(series(text, "sglang_exporter_omni_polls_total", endpoint="model_info", result="ok"))


def live(shim: bool, root) -> OmniLive:
    out = root / f"{omni.VERSION}-{'shim' if shim else 'no-shim'}"
    out.mkdir(parents=True, exist_ok=True)
    (out / "server.log").unlink(missing_ok=True)
    port = free_port()
    log = str(out / "server.log")
    sidecar = Exporter("--log.path", log, "--log.from-beginning", "--gpu.enabled", "false",
                       "--omni.url", f"http://127.0.0.1:{port}", "--omni.poll-interval", "2", "--omni.timeout", "2",
                       "--sglang.stage-decode-log-intervals", INTERVALS)
    rec = OmniLive(run=None)  # type: ignore[arg-type]
    try:
        def on_poll(entry: dict) -> None:
            if entry["label"] == "end":  # the sidecar's own poll after the pipeline went idle
                before = _polls_ok(sidecar.get("/metrics")[1])
                deadline = time.monotonic() + DEADLINE
                while _polls_ok(sidecar.get("/metrics")[1]) < before + 2 and time.monotonic() < deadline:
                    time.sleep(0.2)
            rec.pairs.append((entry, sidecar.get("/metrics")[1]))

        rec.run = omni.run(out, shim, LOAD, on_poll=on_poll, port=port)
        rec.final = read_to_end(sidecar, out / "server.log")
    finally:
        sidecar.terminate()
        rec.sidecar_log = "".join(sidecar.stderr_lines)
    rec.one_shot = subprocess.run([*command(), "--log.path", log, "--one-shot", "--sglang.stage-decode-log-intervals",
                                   INTERVALS], check=True, capture_output=True, text=True).stdout
    plain = subprocess.run([*command(), "--log.path", log, "--one-shot"], check=True, capture_output=True, text=True)
    rec.one_shot_default, rec.one_shot_default_err = plain.stdout, plain.stderr
    rec.report = json.loads(subprocess.run([*command(), "report", log, "--format", "json",
                                            "--stage-decode-log-intervals", INTERVALS], check=True,
                                           capture_output=True, text=True).stdout)
    rec.hand = omni.hand_count((out / "server.log").read_text(errors="replace"))
    (out / "sidecar-final.prom").write_text(rec.final)
    (out / "one-shot.prom").write_text(rec.one_shot)
    (out / "report.json").write_text(json.dumps(rec.report, indent=1))
    with open(out / "pairs.jsonl", "w") as f:
        for entry, side in rec.pairs:
            f.write(json.dumps({"model_info": entry, "sidecar": side}) + "\n")
    return rec


_RUNS: dict[bool, OmniLive] = {}


def _live(shim: bool, tmp_path_factory) -> OmniLive:
    require_stack(omni.VERSION)
    if shim not in _RUNS:
        _RUNS[shim] = live(shim, records_root(tmp_path_factory))
    return _RUNS[shim]


@pytest.fixture(scope="module")
def shim(tmp_path_factory):
    return _live(True, tmp_path_factory)


@pytest.fixture(scope="module")
def no_shim(tmp_path_factory):
    return _live(False, tmp_path_factory)


def stage_value(text: str, name: str, stage: str, **labels) -> float:
    found = series(text, name, stage=stage, **labels)
    assert found, f"no sample {name} stage={stage} {labels}"
    return sum(found)


# --- the stand-in's one Omni op ---------------------------------------------------------------

def test_the_murmur_hash_stand_in_equals_a_scalar_murmur3():
    """``torch.ops.sgl_kernel.murmur_hash32_cpu`` (Omni's seeded sampling on the CPU) hashes the four
    words seed low, seed high, position, column as MurmurHash3 x86_32 with seed 0 does."""
    require_stack(omni.VERSION)
    code = r"""
import torch, sgl_kernel
M = 0xFFFFFFFF
def ref(words):
    h = 0
    for k in words:
        k = (k * 0xCC9E2D51) & M; k = ((k << 15) | (k >> 17)) & M; k = (k * 0x1B873593) & M
        h ^= k; h = ((h << 13) | (h >> 19)) & M; h = (h * 5 + 0xE6546B64) & M
    h ^= 16; h ^= h >> 16; h = (h * 0x85EBCA6B) & M; h ^= h >> 13; h = (h * 0xC2B2AE35) & M
    return h ^ (h >> 16)
seeds = [0, 1, 12345678901234, 2**63 - 1]
pos = [0, 7, 4095, 123456]
out = torch.ops.sgl_kernel.murmur_hash32_cpu.default(torch.tensor(seeds).to(torch.uint64), torch.tensor(pos),
                                                     torch.arange(6))
assert out.dtype == torch.uint32 and tuple(out.shape) == (4, 6), (out.dtype, out.shape)
bad = [(i, j) for i, s in enumerate(seeds) for j in range(6)
       if int(out[i, j].to(torch.int64)) != ref([s & M, s >> 32, pos[i], j])]
print("mismatch", bad)
"""
    done = subprocess.run([str(stack.python(omni.VERSION)), "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "mismatch []"


# --- with the shim: every stage its own figures ------------------------------------------------

def test_every_request_is_answered_and_audio_comes_back(shim):
    sent = shim.run.requests
    assert len(sent) == LOAD.n and all(r["status"] == 200 for r in sent), sent
    assert all(r["audio_bytes"] > 0 for r in sent if r["audio"]) and any(r["audio"] for r in sent)
    assert all(r["audio_bytes"] == 0 for r in sent if not r["audio"])


def test_prefill_batches_per_stage_equal_the_hand_count(shim):
    """Exact: one Prefill batch line per prefill batch of each stage; live, one-shot and report."""
    for stage in STAGES:
        want = shim.hand.prefill[stage]
        assert want > 0, stage
        assert stage_value(shim.final, "sglang_scheduler_batches_total", stage, phase="prefill") == want
        assert stage_value(shim.one_shot, "sglang_scheduler_batches_total", stage, phase="prefill") == want
        assert shim.report["stages"][stage]["retractions"]["prefill_batches"] == want


def test_admissions_per_stage_equal_the_hand_count_and_what_was_sent(shim):
    """Exact at INFO: a stage's admissions are the ``#new-seq`` of its Prefill lines (no chunked
    prefill with these short prompts). Every request crosses the thinker, the ones asking for audio
    the talker too; Omni's own warm-up request (text, image and audio in, audio out) adds one to each."""
    audio = sum(r["audio"] for r in shim.run.requests)
    want = {"thinker": LOAD.n + 1, "talker_ar": audio + 1}
    for stage in STAGES:
        assert shim.hand.admitted[stage] == want[stage], (stage, shim.hand.admitted)
        assert stage_value(shim.final, "sglang_scheduler_admitted_requests_total", stage) == want[stage]
        assert stage_value(shim.one_shot, "sglang_scheduler_admitted_requests_total", stage) == want[stage]
        assert shim.report["stages"][stage]["queue_latency"]["admitted_requests"] == want[stage]


def test_decode_steps_per_stage_rest_on_the_stages_setting(shim):
    """Omni prints no server_args and /model_info does not serve the interval: with
    ``--sglang.stage-decode-log-intervals`` each stage's decode steps are its Decode lines x its own
    interval (1 here, so exact), labelled ``source="setting"``, and no stage is warned about."""
    for stage in STAGES:
        lines = shim.hand.decode[stage]
        assert lines > 0, stage
        assert stage_value(shim.final, "sglang_scheduler_batches_total", stage, phase="decode") == lines
        assert stage_value(shim.final, "sglang_scheduler_decode_log_interval", stage, source="setting") == 1
        assert stage_value(shim.one_shot, "sglang_scheduler_batches_total", stage, phase="decode") == lines
        section = shim.report["stages"][stage]
        assert section["retractions"]["decode_steps"] == lines
        assert section["settings"]["decode_log_interval_source"] == "--stage-decode-log-intervals"
    assert "decode_log_interval: the log has no server_args" not in shim.sidecar_log


def test_without_the_stages_intervals_decode_steps_are_marked_assumed_and_warned_once_per_stage(shim):
    """Nothing says the interval: each stage's decode steps rest on SGLang's default, the series says
    ``source="default"`` and stderr warns once per stage, naming the setting; never silently 40."""
    for stage in STAGES:
        assert stage_value(shim.one_shot_default, "sglang_scheduler_decode_log_interval", stage,
                           source="default") == 40
        assert stage_value(shim.one_shot_default, "sglang_scheduler_batches_total", stage,
                           phase="decode") == 40 * shim.hand.decode[stage]
        warned = [x for x in shim.one_shot_default_err.splitlines() if f"(stage {stage})" in x
                  and "decode_log_interval" in x]
        assert len(warned) == 1 and f"--sglang.stage-decode-log-intervals {stage}=STEPS" in warned[0], warned


def test_kv_capacity_per_stage_is_the_stages_kv_cache_line(shim):
    """Each stage's ``KV Cache is allocated ... #tokens`` (the test bed gives both 4096); Omni's
    /model_info does not serve the capacity."""
    for stage in STAGES:
        assert shim.hand.kv_tokens[stage] == 4096
        assert stage_value(shim.final, "sglang_scheduler_max_total_tokens", stage) == 4096
        assert stage_value(shim.one_shot, "sglang_scheduler_max_total_tokens", stage) == 4096


def test_running_and_queued_requests_against_model_info_at_the_same_moments(shim):
    """Omni's /model_info counts each stage's running batch and waiting queue when asked; the log's
    figures are those of the stage's latest stats line (printed every decode pass here). During the
    load the two agree within the load's concurrency, and the sidecar's own /model_info gauges follow
    Omni. Once the pipeline is idle Omni says 0 and 0, and so does the sidecar's snapshot (exact)."""
    load = [(e, side) for e, side in shim.pairs if e["label"] == "load" and e["status"] == 200]
    assert load, "no /model_info answer during the load"
    for entry, side in load:
        for stage in STAGES:
            info = model_info_stage(entry["body"], stage)
            got = series(side, "sglang_scheduler_running_requests", stage=stage)
            if got:  # before a stage's first stats line it has no latest line
                assert abs(got[0] - info["running_batch_size"]) <= LOAD.concurrency, (stage, got, info)
            queued = series(side, "sglang_scheduler_queue_requests", stage=stage)
            if queued:
                assert abs(queued[0] - info["waiting_queue_size"]) <= LOAD.concurrency, (stage, queued, info)
    end, side = next(p for p in shim.pairs if p[0]["label"] == "end")
    for stage in STAGES:
        info = model_info_stage(end["body"], stage)
        assert (info["running_batch_size"], info["waiting_queue_size"]) == (0, 0), info
        assert stage_value(side, "sglang_omni_stage_running_requests", stage) == 0
        assert stage_value(side, "sglang_omni_stage_waiting_requests", stage) == 0


# --- without the shim: two SGLang-backed stages, no line given to a stage ---------------------

def test_without_the_shim_no_line_goes_to_a_stage_and_every_one_is_counted(no_shim):
    """docs/sglang-omni.md: with two SGLang-backed stages and no shim, scheduler lines go to no stage's
    metrics; each is counted as unattributed, the sidecar says why once and names the shim."""
    assert all(r["status"] == 200 for r in no_shim.run.requests), no_shim.run.requests
    assert no_shim.hand.prefill == Counter() and no_shim.hand.scheduler_lines > 0
    got = samples(no_shim.final)
    unattributed = sum(v for (n, lab), v in got.items() if n == "sglang_exporter_log_lines_total"
                       and dict(lab).get("result") == "unattributed" and dict(lab).get("kind") in ("prefill", "decode"))
    assert unattributed == no_shim.hand.scheduler_lines
    assert not series(no_shim.final, "sglang_scheduler_batches_total")
    assert not series(no_shim.one_shot, "sglang_scheduler_batches_total")
    assert "sitecustomize" in no_shim.sidecar_log or "shim" in no_shim.sidecar_log


def test_without_the_shim_model_info_still_gives_each_stage(no_shim):
    """The poller needs no shim: idle, Omni and the sidecar say 0 running and 0 waiting per stage."""
    end, side = next(p for p in no_shim.pairs if p[0]["label"] == "end")
    for stage in STAGES:
        info = model_info_stage(end["body"], stage)
        assert stage_value(side, "sglang_omni_stage_running_requests", stage) == info["running_batch_size"] == 0
        assert stage_value(side, "sglang_omni_stage_waiting_requests", stage) == info["waiting_queue_size"] == 0

"""The report on SGLang Omni logs: one section per stage (exporter/report/read.py ``stage_view``,
analyse.py), never two stages merged, and plain SGLang's report unchanged in shape."""

from __future__ import annotations

import json
import subprocess
import sys
from html.parser import HTMLParser

import pytest

from exporter.report.schema import violations
from exporter.report.text import text
from report_support import report_lines

T = "2026-08-20 10:15:{s:02d},{ms:03d}"


class _Ids(HTMLParser):
    """The ``id`` attributes of a page, in order (the standard library's parser)."""

    def __init__(self):
        super().__init__()
        self.ids: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.ids += [v for k, v in attrs if k == "id"]

REPORTER = "sglang.srt.managers.scheduler_components.metrics_reporter"


def stage_lines(stage: str, running: int, decodes: int, shim: bool, kv_tokens: int, bs_max: int) -> list[str]:
    def tok(thread: str) -> str:
        return f"[stage-{stage}/{thread}] " if shim else ""

    out = [f"{T.format(s=0, ms=1)} [INFO] {tok('MainThread')}sglang_omni.models.qwen3_omni.stages: sglang_ar_startup "
           f"stage={stage} gpu_id=0 tp_rank=0/1 context_length=8192",
           f"{T.format(s=0, ms=2)} [INFO] {tok('MainThread')}sglang.srt.mem_cache.memory_pool: KV Cache is allocated. "
           f"dtype: torch.bfloat16, #tokens: {kv_tokens}, K size: 4.00 GB, V size: 4.00 GB",
           f"{T.format(s=0, ms=3)} [INFO] {tok('MainThread')}sglang.srt.model_executor.model_runner_components."
           f"cuda_graph_setup: Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1, "
           f"bs=[1, 2, 4, {bs_max}], avail mem=9.00 GB"]
    for i in range(decodes):
        out.append(f"{T.format(s=1 + i, ms=0)} [INFO] {tok('scheduler-' + stage)}{REPORTER}: Decode batch, "
                   f"#running-req: {running}, #token: {running * 100}, token usage: 0.10, cuda graph: True, gen "
                   f"throughput (token/s): 400.00, #queue-req: 0")
    out.append(f"{T.format(s=30, ms=5)} [WARNING] {tok('scheduler-' + stage)}sglang.srt.managers.scheduler: KV cache "
               "pool is full. Retract requests. #retracted_reqs: 1, #new_tokens_gained: 100, #new_token_ratio: "
               "0.4000 -> 0.5000")
    return out


def two_stages(shim: bool) -> list[str]:
    thinker = stage_lines("thinker", 8, 6, shim, 262144, 64)
    talker = stage_lines("talker_ar", 3, 4, shim, 65536, 32)
    return thinker[:3] + talker[:3] + [x for pair in zip(thinker[3:], talker[3:]) for x in pair] + thinker[3 + len(talker) - 3:]


def test_two_stages_through_the_shim_get_a_section_each():
    doc = report_lines(two_stages(shim=True))
    assert doc["schedulers"] == [] and set(doc["stages"]) == {"thinker", "talker_ar"}
    thinker, talker = doc["stages"]["thinker"], doc["stages"]["talker_ar"]
    assert (thinker["batch_size"]["decode"]["p50"], thinker["batch_size"]["decode"]["count"]) == (8, 6)
    assert (talker["batch_size"]["decode"]["p50"], talker["batch_size"]["decode"]["count"]) == (3, 4)
    assert thinker["retractions"]["events"] == talker["retractions"]["events"] == 1
    assert thinker["kv_capacity"]["capacity_tokens"] == 262144 and talker["kv_capacity"]["capacity_tokens"] == 65536
    assert thinker["kv_capacity"]["capacity_source"] == "KV Cache is allocated line"
    assert thinker["batch_size"]["max_running_requests"] == 64  # the CUDA-graph proxy, named as such
    assert "proxy" in thinker["batch_size"]["max_running_requests_source"]
    assert talker["batch_size"]["max_running_requests"] == 32
    assert thinker["schedulers"] == talker["schedulers"] == ["0"]
    assert violations(doc) == []
    out = text(doc)
    assert "SGLang Omni stages: talker_ar, thinker" in out
    assert out.index("Stage talker_ar\n---") < out.index("Stage thinker\n---")
    assert out.count("1. Batch size") == 2 and out.count("Checklist") == 2


def test_two_stages_without_the_shim_are_no_stage_and_the_report_says_why():
    doc = report_lines(two_stages(shim=False))
    assert doc["stages"] == {} and doc["schedulers"] == []
    assert doc["lines"]["unattributed"] == {"decode": 10, "kv_allocation": 2, "omni": 2, "retraction": 2}
    assert doc["batch_size"]["decode"]["count"] == 0  # merged into nothing, at the top level either
    assert ("unattributed: 16 SGLang Omni lines in no stage's figures: SGLang Omni runs 2 SGLang-backed stages "
            "(talker_ar, thinker)") in text(doc)


def test_one_stage_without_the_shim_is_named_by_its_start_up_line():
    doc = report_lines(stage_lines("thinker", 8, 6, False, 262144, 64))
    assert list(doc["stages"]) == ["thinker"] and doc["lines"]["unattributed"] == {}
    assert doc["stages"]["thinker"]["kv_capacity"]["capacity_tokens"] == 262144


def test_plain_sglang_keeps_its_shape_with_empty_stages():
    doc = report_lines(["[2026-07-21 10:00:00] Decode batch, #running-req: 4, #token: 90, token usage: 0.01, "
                        "#queue-req: 0"])
    assert doc["stages"] == {} and doc["schedulers"] == ["0"] and doc["lines"]["unattributed"] == {}
    assert "Stage " not in text(doc)


def test_the_command_writes_html_with_a_block_per_stage(tmp_path):
    log = tmp_path / "omni.log"
    log.write_text("\n".join(two_stages(shim=True)) + "\n")
    out = tmp_path / "r.html"
    r = subprocess.run([sys.executable, "-m", "exporter", "report", str(log), "--format", "html", "-o", str(out)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    page = out.read_text()
    assert 'id="stage-thinker"' in page and 'id="stage-talker_ar"' in page


def test_a_real_omni_html_has_each_stages_summary_and_plots_and_says_what_rests_on_an_assumption(tmp_path):
    """Real SGLang Omni 0.1.9 (corpus 064, no server_args): before, the page had no summary and no
    plots for the stages, and the throughput rested on SGLang's default decode_log_interval with the
    warning only on stderr. Now each stage block opens with its summary and has its three plots, and
    the computed tokens say beside themselves that they rest on an ASSUMED interval, in every format."""
    pytest.importorskip("matplotlib")
    from conftest import corpus_files

    omni = next(p for p in corpus_files() if p.name.startswith("064-real-omni"))
    out = tmp_path / "r.html"
    r = subprocess.run([sys.executable, "-m", "exporter", "report", str(omni), "--format", "html", "-o", str(out)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    page = out.read_text()
    for stage in ("thinker", "talker_ar"):
        block = page[page.index(f'id="stage-{stage}"'):]
        block = block[:block.index("</section>\n<section class=\"stage\"")] if '<section class="stage"' in block[10:] else block
        assert block.index(f'id="stage-{stage}-summary"') < block.index(f'id="stage-{stage}-batch-size"')
        assert block.count("data:image/png;base64,") == 3, stage
    assert "an ASSUMED interval" in page
    ids = _Ids()
    ids.feed(page)
    repeated = sorted({i for i in ids.ids if ids.ids.count(i) > 1})
    assert not repeated, repeated  # 'summary', 'batch-size', 'plot-kv_usage'... were once per stage
    assert {"stage-thinker-summary", "stage-talker_ar-summary", "stage-talker_ar-plot-kv_usage"} <= set(ids.ids)
    text_out = subprocess.run([sys.executable, "-m", "exporter", "report", str(omni)], capture_output=True,
                              text=True, timeout=120).stdout
    rows = [line for line in text_out.splitlines() if line.strip().startswith(("computed tokens", "tokens/s computed"))]
    assert len(rows) == 4 and all("ASSUMED" in line for line in rows), rows
    doc = json.loads(subprocess.run([sys.executable, "-m", "exporter", "report", "--format", "json", str(omni)],
                                    capture_output=True, text=True, timeout=120).stdout)
    for stage in doc["stages"].values():
        assert stage["throughput"]["decode_tokens_basis"].startswith("estimated: Decode lines x 40 steps, an ASSUMED")
    given = subprocess.run([sys.executable, "-m", "exporter", "report", "--format", "json",
                            "--stage-decode-log-intervals", "thinker=1,talker_ar=1", str(omni)],
                           capture_output=True, text=True, timeout=120).stdout
    for stage in json.loads(given)["stages"].values():
        assert "ASSUMED" not in stage["throughput"]["decode_tokens_basis"]

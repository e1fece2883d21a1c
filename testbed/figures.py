"""Side by side, per kept run: the sidecar's figures and SGLang's own counters of the same run.

``python3 -m testbed figures RECORDS`` reads every run folder under ``RECORDS`` (as kept by
``tests/test_real_sglang.py`` with ``$SGLANG_TESTBED_RECORDS``) and prints one Markdown
table per run. Standard library only: it parses the exposition text itself (names, labels, values).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from . import omni

_SAMPLE = re.compile(r'^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$')
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def parse(text: str) -> list[tuple[str, dict, float]]:
    """``(name, labels, value)`` of every sample of an exposition text."""
    out = []
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if m and not line.startswith("#"):
            out.append((m.group(1), dict(_LABEL.findall(m.group(2) or "")), float(m.group(3))))
    return out


def total(samples, name: str, **want) -> float:
    return sum(v for n, lab, v in samples if n == name and all(lab.get(k) == x for k, x in want.items()))


def table(run: Path) -> str:
    """The Markdown table of one run folder."""
    meta = json.loads((run / "run.json").read_text())
    starts = range(len(meta["starts"]))
    end = [parse((run / "sglang-metrics" / f"{i}-end.prom").read_text()) for i in starts]
    side = parse((run / "sidecar-final.prom").read_text())
    rep = json.loads((run / "report.json").read_text())

    def sg(name, **labels):
        return sum(total(e, name, **labels) for e in end)

    rows = [
        ("prefill batches", total(side, "sglang_scheduler_batches_total", phase="prefill"),
         sg("sglang:cuda_graph_passes_total", mode="prefill_none"), "exact"),
        ("decode steps", total(side, "sglang_scheduler_batches_total", phase="decode"),
         sg("sglang:cuda_graph_passes_total", mode="decode_none"), "Decode lines x interval"),
        ("retracted requests", total(side, "sglang_scheduler_retracted_requests_total"),
         sg("sglang:num_retracted_requests_total"), "exact"),
        ("recomputed tokens (freed KV)", total(side, "sglang_scheduler_recomputed_tokens_total", method="new_tokens_gained"),
         sg("sglang:num_retracted_input_tokens_total") + sg("sglang:num_retracted_output_tokens_total"),
         "SGLang: retracted input + output tokens"),
    ]
    adm = total(side, "sglang_scheduler_admitted_requests_total")
    qs = total(side, "sglang_scheduler_queue_request_seconds_total")
    count = sg("sglang:queue_time_seconds_count")
    if adm and count:
        rows.append(("mean queue wait (s)", round(qs / adm, 3), round(sg("sglang:queue_time_seconds_sum") / count, 3),
                     "Little's law vs queue_time_seconds"))
    step = (rep.get("queue_latency") or {}).get("decode_step_seconds")
    tpots = [s["result"].get("mean_tpot_ms") for s in meta["starts"] if s["result"].get("mean_tpot_ms")]
    if step and tpots:
        rows.append(("report decode step (ms)", round(step * 1000, 1), round(sum(tpots) / len(tpots), 1),
                     "client mean TPOT"))
    lines = [f"**{meta['scenario']} on SGLang {meta['version']}** ({len(meta['starts'])} start(s))", "",
             "| figure | sidecar | SGLang | how |", "|---|---|---|---|"]
    lines += [f"| {a} | {b:g} | {c:g} | {d} |" for a, b, c, d in rows]
    return "\n".join(lines) + "\n"


def omni_table(run: Path) -> str:
    """The Markdown table of one SGLang Omni run folder (``tests/test_real_omni.py``): per stage, the
    sidecar's figures beside hand counts of the finished log (the logging shim's ``[stage-X/...]``
    token; without the shim the log cannot say, and the sidecar counts the lines unattributed)."""
    meta = json.loads((run / "run.json").read_text())
    side = parse((run / "sidecar-final.prom").read_text())
    hand = omni.hand_count((run / "server.log").read_text(encoding="utf-8", errors="replace"))
    lines = [f"**SGLang Omni {meta['version']}, {meta['launcher']}, shim {'on' if meta['shim'] else 'off'}**", "",
             "| stage | prefill batches sidecar / log | Decode lines: sidecar decode steps / log | admitted sidecar / log #new-seq |",
             "|---|---|---|---|"]
    for stage in sorted(hand.prefill.keys() | hand.decode.keys()):
        lines.append(f"| {stage} | {total(side, 'sglang_scheduler_batches_total', phase='prefill', stage=stage):g} / "
                     f"{hand.prefill[stage]} | {total(side, 'sglang_scheduler_batches_total', phase='decode', stage=stage):g} / "
                     f"{hand.decode[stage]} | {total(side, 'sglang_scheduler_admitted_requests_total', stage=stage):g} / "
                     f"{hand.admitted[stage]} |")
    unattributed = total(side, "sglang_exporter_log_lines_total", result="unattributed")
    lines.append(f"\nunattributed lines (sidecar): {unattributed:g}")
    return "\n".join(lines) + "\n"


def main(records: Path) -> str:
    """One table per run folder under ``records``: SGLang runs (``starts`` in run.json) and SGLang
    Omni runs (``launcher``)."""
    out = []
    for run in sorted(records.iterdir()):
        if not (run / "sidecar-final.prom").exists():
            continue
        meta = json.loads((run / "run.json").read_text())
        out.append(omni_table(run) if "launcher" in meta else table(run))
    return "\n".join(out)

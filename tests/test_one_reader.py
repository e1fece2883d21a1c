"""One reader: ``--one-shot`` (the bulk path) and ``report`` read a log through the same pipeline (the
sidecar's splitter, parser, stage attribution, scheduler store and line counts), so they agree on every
line and every count. The live sidecar's per-line path is the report's (``Ingest``); the bulk path is
held to it by ``tests/test_log_bulk.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import corpus_files, samples

EXPORTER = [sys.executable, "-m", "exporter"]


def _one_shot(path) -> dict:
    out = subprocess.run([*EXPORTER, "--one-shot", "--log.path", str(path)], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode in (0, 3), out.stderr[-2000:]
    return samples(out.stdout)


def _report(path) -> dict:
    out = subprocess.run([*EXPORTER, "report", "--format", "json", str(path)], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode in (0, 3), out.stderr[-2000:]
    return json.loads(out.stdout)


def _line_counts_of_metrics(s: dict) -> dict:
    return {(dict(labels)["kind"], dict(labels)["result"]): v for (name, labels), v in s.items()
            if name == "sglang_exporter_log_lines_total" and v}


def _line_counts_of_report(doc: dict) -> dict:
    lines = doc["lines"]
    out = {(k, "parsed"): v for k, v in lines["parsed"].items()}
    out.update({(k, "malformed"): v for k, v in lines["malformed"].items()})
    out.update({(k, "unattributed"): v for k, v in lines["unattributed"].items()})
    out[("other", "ignored")] = lines["ignored"]
    return {k: v for k, v in out.items() if v}


def _total(s: dict, name: str, **labels) -> float:
    """A family's sum over every scheduler (stage, DP rank) with ``labels``."""
    return sum(v for (n, lab), v in s.items() if n == name and all(dict(lab).get(k) == x for k, x in labels.items()))


@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: p.name[:3])
def test_one_shot_and_report_read_every_corpus_log_alike(path):
    s, doc = _one_shot(path), _report(path)
    assert _line_counts_of_report(doc) == _line_counts_of_metrics(s)
    if doc["stages"]:  # SGLang Omni: one section per stage (tests/test_report_stages.py)
        return
    retractions = doc["retractions"]
    assert retractions["events"] == _total(s, "sglang_scheduler_retractions_total")
    assert retractions["requests"] == _total(s, "sglang_scheduler_retracted_requests_total")
    assert retractions["prefill_batches"] == _total(s, "sglang_scheduler_batches_total", phase="prefill")
    assert retractions["decode_steps"] == _total(s, "sglang_scheduler_batches_total", phase="decode")


def test_carriage_returns_and_nul_bytes_make_the_same_lines_in_both(tmp_path):
    """The issue's bytes: three lines of ``Prefill...\\rDecode...`` and one ``\\0\\0Decode...``. Before,
    ``--one-shot`` counted 3 prefill batches (its splitter separates lines at a bare ``\\r``) and ``report``
    0 (it split on ``\\n`` only, and the Prefill line then ended in a Decode line)."""
    prefill = ("[2026-12-01 21:45:14] Prefill batch, #new-seq: 1, #new-token: 130, #cached-token: 0, token usage: 0.01, "
               "#running-req: 0, #queue-req: 0, input throughput (token/s): 0.00, cuda graph: False")
    decode = ("[2026-12-01 21:45:15] Decode batch, #running-req: 1, #token: 140, token usage: 0.01, cpu graph: False, "
              "gen throughput (token/s): 2.21, #queue-req: 0")
    path = tmp_path / "cr.log"
    path.write_bytes(((prefill + "\r" + decode + "\n") * 3 + "\0\0" + decode + "\n").encode())
    s, doc = _one_shot(path), _report(path)
    assert _line_counts_of_report(doc) == _line_counts_of_metrics(s) == {("prefill", "parsed"): 3,
                                                                         ("decode", "parsed"): 4}
    assert doc["retractions"]["prefill_batches"] == 3


#: Corpus logs whose Prefill/Decode lines the fast path's pattern does not read, by design: SGLang's
#: 2024-01 line format ("new fill batch"), and SGLang Omni's logging format (its lines go through the
#: stage attribution line by line). Every other era must stay on the fast path.
OFF_THE_FAST_PATH = {"021", "064"}


@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: p.name[:3])
def test_every_era_of_the_corpus_stays_on_the_fast_path(path):
    """``sglang_exporter_log_template_lines_total`` over the parsed Prefill/Decode lines: 1 for every
    corpus era but the named ones. A new field on SGLang's Decode line makes its lines miss the
    pattern and fall to the per-line parser (several times slower, the same figures): this fails."""
    s = _one_shot(path)
    stats_lines = sum(s.get(("sglang_exporter_log_lines_total", (("kind", k), ("result", "parsed"))), 0)
                      for k in ("prefill", "decode"))
    template = s[("sglang_exporter_log_template_lines_total", ())]
    if path.name[:3] in OFF_THE_FAST_PATH:
        assert stats_lines and template < stats_lines
    else:
        assert template == stats_lines


def test_one_shot_reads_gzip_as_report_does(tmp_path):
    """``--one-shot`` read a ``.gz`` file's compressed bytes as lines (no scheduler line, exit 3);
    ``report`` decompressed it. Now both decompress: the same series as the plain file, by path too
    (a glob of rotated, compressed segments), and a truncated file keeps the lines before the damage
    with one warning naming it."""
    import gzip

    plain = next(p for p in corpus_files() if p.name.startswith("060"))
    packed = tmp_path / "server.log.1.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    def counts(s: dict) -> dict:  # less what names the file or reads the clock
        return {k: v for k, v in s.items() if "path" not in dict(k[1])
                and not k[0].endswith(("_timestamp_seconds", "_duration_seconds"))}

    want = counts(_one_shot(plain))
    got = _one_shot(packed)
    assert counts(got) == want
    assert _line_counts_of_report(_report(packed)) == _line_counts_of_metrics(got)
    assert _total(_one_shot(tmp_path / "server.log*"), "sglang_scheduler_batches_total", phase="prefill") \
        == _total(want, "sglang_scheduler_batches_total", phase="prefill") > 0

    cut = tmp_path / "cut.log.gz"
    cut.write_bytes(packed.read_bytes()[:len(packed.read_bytes()) // 2])
    out = subprocess.run([*EXPORTER, "--one-shot", "--log.path", str(cut)], capture_output=True, text=True,
                         timeout=120)
    assert "cannot read" in out.stderr and "cut.log.gz" in out.stderr and "damaged gzip data" in out.stderr
    s = samples(out.stdout)
    decoded = s[("sglang_exporter_log_lines_total", (("kind", "decode"), ("result", "parsed")))]
    assert 0 < decoded < want[("sglang_exporter_log_lines_total", (("kind", "decode"), ("result", "parsed")))]

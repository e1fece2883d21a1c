"""The bulk path of recorded logs (exporter/sources/log/bulk.py, templates.py, bulk_ingest.py,
exporter/scheduler/runs.py) against the per-line path, its reference: the same bytes read both ways
give the same /metrics text, byte for byte, and the same line and scheduler-line counts per file (one-shot's
exit 3), over the whole corpus, the SGLang Omni logs (with and without the logging shim, mixed with plain
SGLang lines), fuzzed logs and the bench log, in one process and on worker processes, in one read and in
many small ones."""

from __future__ import annotations

import importlib.util
import os
import re
import random
import sys
import subprocess

import pytest
from bulk_support import TEMPLATE_TITLES, corpus_lines, exposition, fuzzed_log, mutate, read_log
from conftest import ROOT, corpus_files, value
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from exporter.limits import MAX_SCHEDULERS
from exporter.sources.log import bulk_ingest, file as file_module
from exporter.sources.log.bulk import scan_block
from exporter.sources.log.parser import parse_line
from exporter.sources.log.prefix import parse_origin
from exporter.sources.log.templates import FULL, SCAN, parse_template
from exporter.events import DecodeBatch, PrefillBatch


def _same(path, monkeypatch, workers=0, **kw) -> str:
    """The /metrics text of ``path`` by both paths, required equal, and so each file's line and
    scheduler-line counts (one-shot's exit 3 and its warnings)."""
    want, want_files = read_log(path, bulk=False, **kw)
    got, got_files = read_log(path, bulk=True, workers=workers, monkeypatch=monkeypatch, **kw)
    assert got == want
    assert got_files == want_files
    return got


@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: p.name[:3])
def test_every_corpus_log_gives_the_same_metrics(path, monkeypatch):
    _same(path, monkeypatch)


def test_the_whole_corpus_in_small_reads_on_workers(tmp_path, monkeypatch):
    """Every corpus log one after the other, read 4 KiB at a time (blocks end mid-line, mid-run) and
    scanned by two worker processes, then applied in order."""
    path = tmp_path / "corpus.log"
    path.write_bytes(b"\n".join(corpus_lines()) + b"\n")
    monkeypatch.setattr(file_module, "READ_CHUNK", 4096)
    text = _same(path, monkeypatch, workers=2)
    assert 'sglang_scheduler_batches_total{dp_rank="0",phase="decode",stage=""}' in text


@pytest.mark.parametrize("seed", range(6))
def test_fuzzed_logs_give_the_same_metrics(tmp_path, monkeypatch, seed):
    path = tmp_path / "fuzz.log"
    path.write_bytes(fuzzed_log(seed, 4000))
    monkeypatch.setattr(file_module, "READ_CHUNK", 1 << (12 + seed % 5))
    kw = {"max_line_bytes": (200, 1024)[seed % 2]} if seed % 3 == 0 else {}
    if seed % 2:
        kw["chunked_prefill_size"] = 4096
    _same(path, monkeypatch, workers=2 if seed < 2 else 0, **kw)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2 ** 32 - 1), lines=st.integers(1, 300), chunk=st.integers(64, 4096),
       interval=st.sampled_from([1, 40]))
def test_fuzzed_logs_any_chunking(tmp_path_factory, monkeypatch, seed, lines, chunk, interval):
    path = tmp_path_factory.mktemp("bulk") / "fuzz.log"
    path.write_bytes(fuzzed_log(seed, lines))
    monkeypatch.setattr(file_module, "READ_CHUNK", chunk)
    _same(path, monkeypatch, max_line_bytes=1024, decode_log_interval=interval)


def test_the_bench_log_on_workers(tmp_path, monkeypatch):
    """bench/genlog.py's log (every prefix style and era of the corpus, re-clocked), 1 MiB reads."""
    path = tmp_path / "bench.log"
    _genlog().build(str(path), 40_000, str(ROOT / "tests" / "corpus"))
    text = _same(path, monkeypatch, workers=2)
    assert 'sglang_exporter_log_lines_total{kind="decode",result="parsed"} 2' in text
    # An SGLang server's log: the corpus's SGLang Omni pipelines (064-066) are not drawn from.
    assert 'kind="omni",result="parsed"} 0.0' in text and 'stage="thinker"' not in text


def _genlog():
    """bench/genlog.py, the bench's log builder, as a module."""
    spec = importlib.util.spec_from_file_location("genlog", ROOT / "bench" / "genlog.py")
    genlog = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(genlog)
    return genlog


@pytest.mark.parametrize("chunk", [1 << 20, 16384])
@pytest.mark.parametrize("kind", ["real-output", "restarts"])
def test_the_real_server_logs_of_the_bench(tmp_path, monkeypatch, kind, chunk):
    """bench/genlog.py's logs from the test bed's recorded SGLang 0.5.23 output (corpus log 060): its
    start-up lines once, its steady state repeated, and with a start-up block (server_args, capacity,
    KV Cache is allocated) every 2,000 lines; read in 1 MiB and in 16 KiB reads (blocks end inside a
    start-up block), on two worker processes."""
    path = tmp_path / f"{kind}.log"
    info = _genlog().build_real(str(path), 20_000, kind, every=2_000)
    assert info["startup_blocks"] == (10 if kind == "restarts" else 1)
    monkeypatch.setattr(file_module, "READ_CHUNK", chunk)
    text = _same(path, monkeypatch, workers=2)
    assert 'sglang_scheduler_max_total_tokens{dp_rank="0",stage=""} 20000.0' in text
    assert re.search(r'sglang_exporter_log_lines_total\{kind="prefill",result="parsed"\} [1-9]', text)
    assert f'sglang_exporter_log_lines_total{{kind="capacity",result="parsed"}} {info["startup_blocks"]}.0' in text


def test_a_block_with_start_up_lines_is_read_as_runs_between_them():
    """The start-up lines of a block end its parts: the lines before and after each are runs, and the
    start-up line is handed on as text, in order."""
    decode = (b"[2026-09-13 16:00:01] Decode batch, #running-req: 3, #token: 30, token usage: 0.10, "
              b"cpu graph: False, gen throughput (token/s): 10.00, #queue-req: 2")
    capacity = (b"[2026-09-13 16:00:02] max_total_num_tokens=20000, chunked_prefill_size=4096, "
                b"max_prefill_tokens=16384, max_running_requests=16, context_len=4096")
    access = b'[2026-09-13 16:00:02] INFO:     127.0.0.1:54716 - "POST /generate HTTP/1.1" 200 OK'
    res, rest = scan_block(b"\n".join([decode, decode, access, capacity, access, access, decode]), 1 << 20)
    assert not res.by_line
    assert (res.start, res.stop, res.lines, res.ignored) == (0, 3, 3, 1)
    assert res.then == [capacity.decode()]
    assert res.run.replicas[0].decode_lines == 2
    assert (rest.start, rest.stop, rest.lines, rest.ignored, rest.then) == (4, None, 3, 2, [])
    assert rest.run.replicas[0].decode_lines == 1
    # start-up lines in a row are one stretch for the per-line path, without an empty part between them
    res, rest = scan_block(b"\n".join([decode, capacity, capacity, decode]), 1 << 20)
    assert (res.stop, res.then, rest.start, rest.run.replicas[0].decode_lines) == (
        1, [capacity.decode()] * 2, 3, 1)


def test_a_refused_part_after_a_start_up_line_is_read_line_by_line(tmp_path, monkeypatch):
    """One block: runs of 8 DP ranks, a start-up line, lines of more schedulers than the cap (that
    part is read line by line, its lines past the cap refused), another start-up line, a run."""
    line = ("[2026-09-13 16:00:{s:02d} DP{dp} TP0] Decode batch, #running-req: 3, #token: 30, token usage: 0.10, "
            "cuda graph: False, gen throughput (token/s): 10.00, #queue-req: {q}")
    capacity = ("[2026-09-13 16:00:30 DP0 TP0] max_total_num_tokens=1000, chunked_prefill_size=100, "
                "max_prefill_tokens=10, max_running_requests=16, context_len=4096")
    args = "[2026-09-13 16:00:31 TP0] server_args=ServerArgs(decode_log_interval=10, chunked_prefill_size=8192)"
    rows = [line.format(s=i % 60, dp=i % 8, q=i % 5) for i in range(300)] + [capacity]
    rows += [line.format(s=i % 60, dp=i, q=1) for i in range(MAX_SCHEDULERS + 40)] + [args]
    rows += [line.format(s=i % 60, dp=i % 8, q=i % 3) for i in range(300)]
    path = tmp_path / "refused-part.log"
    path.write_text("\n".join(rows) + "\n")
    text = _same(path, monkeypatch)
    assert 'sglang_exporter_log_lines_total{kind="decode",result="malformed"} 40.0' in text
    assert 'sglang_scheduler_max_total_tokens{dp_rank="0",stage=""} 1000.0' in text


def test_beyond_the_scheduler_cap_lines_are_rejected_as_the_per_line_path_rejects_them(tmp_path, monkeypatch):
    """A block naming more schedulers than the cap is read line by line; the others in bulk."""
    line = ("[2026-09-13 16:00:{s:02d} DP{dp} TP0] Decode batch, #running-req: 3, #token: 30, token usage: 0.10, "
            "cuda graph: False, gen throughput (token/s): 10.00, #queue-req: {q}")
    rows = [line.format(s=i % 60, dp=i % 8, q=i % 5) for i in range(3000)]
    rows += [line.format(s=i % 60, dp=i, q=1) for i in range(MAX_SCHEDULERS + 40)]
    rows += [line.format(s=i % 60, dp=i % 8, q=i % 3) for i in range(3000)]
    path = tmp_path / "garbage-ranks.log"
    path.write_text("\n".join(rows) + "\n")
    monkeypatch.setattr(file_module, "READ_CHUNK", 8192)
    text = _same(path, monkeypatch, workers=2)
    assert 'sglang_exporter_log_lines_total{kind="decode",result="malformed"} 40.0' in text


def test_start_up_lines_change_what_follows_in_order(tmp_path, monkeypatch):
    """server_args (decode_log_interval) and capacity lines (chunked_prefill_size) between runs: the
    runs before and after each use the values in force at their lines."""
    decode = ("[2026-09-13 16:00:{s:02d} TP0] Decode batch, #running-req: {r}, #token: 30, token usage: 0.10, "
              "cuda graph: False, gen throughput (token/s): 10.00, #queue-req: 2")
    prefill = ("[2026-09-13 16:00:{s:02d} TP0] Prefill batch, #new-seq: 2, #new-token: {t}, #cached-token: 0, "
               "token usage: 0.10, #running-req: 1, #queue-req: 3")
    rows = [decode.format(s=1, r=4), prefill.format(s=2, t=8192), prefill.format(s=3, t=100)]
    rows.append("[2026-09-13 16:00:04 TP0] server_args=ServerArgs(decode_log_interval=10, chunked_prefill_size=8192)")
    rows += [decode.format(s=5, r=4), prefill.format(s=6, t=8192), prefill.format(s=7, t=100)]
    rows.append("[2026-09-13 16:00:08 TP0] max_total_num_tokens=1000, chunked_prefill_size=100, max_prefill_tokens=10")
    rows += [prefill.format(s=9, t=100), prefill.format(s=10, t=50), decode.format(s=11, r=5)]
    path = tmp_path / "startup.log"
    path.write_text("\n".join(rows))
    text = _same(path, monkeypatch)
    assert 'sglang_scheduler_batches_total{dp_rank="0",phase="decode",stage=""} 60.0' in text  # 40, then 10 and 10
    # 2 + 2; 2 + (2 - 1: the 8192-token line ended in a chunk); 2 + (2 - 1: so did the 100-token one)
    assert 'sglang_scheduler_admitted_requests_total{dp_rank="0",stage=""} 10.0' in text


@pytest.mark.parametrize("chunk", [1 << 20, 512])
def test_start_up_lines_in_a_row_and_at_the_ends_of_blocks(tmp_path, monkeypatch, chunk):
    """Start-up lines first, last, in a row, between access-log lines, and (in 512-byte reads) at
    every place in a block."""
    decode = ("[2026-09-13 16:00:{s:02d}] Decode batch, #running-req: {r}, #token: 30, token usage: 0.10, "
              "cpu graph: False, gen throughput (token/s): 10.00, #queue-req: {q}")
    access = '[2026-09-13 16:00:02] INFO:     127.0.0.1:54716 - "POST /generate HTTP/1.1" 200 OK'
    startup = ["[2026-09-13 16:00:00] server_args=ServerArgs(decode_log_interval=10, chunked_prefill_size=8192)",
               "[2026-09-13 16:00:00] max_total_num_tokens=1000, chunked_prefill_size=100, max_prefill_tokens=10, "
               "max_running_requests=16, context_len=4096",
               "[2026-09-13 16:00:00] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1000, K size: 0.00 GB, "
               "V size: 0.00 GB"]
    rows = startup + [decode.format(s=i % 60, r=i % 7, q=i % 3) for i in range(40)]
    for i in range(12):
        rows += startup[:1 + i % 3] + [access] * (i % 2) + startup[i % 3:] + [access]
        rows += [decode.format(s=i, r=i % 5 + 1, q=i % 4) for _ in range(i % 4)]
    rows += startup
    path = tmp_path / "startup-rows.log"
    path.write_text("\n".join(rows) + "\n")
    monkeypatch.setattr(file_module, "READ_CHUNK", chunk)
    text = _same(path, monkeypatch)
    assert 'sglang_exporter_log_lines_total{kind="capacity",result="parsed"} 18.0' in text


def _template_lines() -> list[bytes]:
    rng = random.Random(7)
    real = [line for line in corpus_lines() if line.strip()]
    templated = [line for line in real if any(t in line for t in TEMPLATE_TITLES)]
    return real + [mutate(rng, real, templated) for _ in range(20_000)]


def test_a_template_line_is_what_the_parser_reads():
    """Every corpus line and 20,000 mutated ones: the scan and full patterns accept the same lines;
    a line they accept is a Prefill or Decode line to the parser, with the same identity and time,
    and the bulk path's columns for it hold the parser's values."""
    matched = 0
    for line in _template_lines():
        m = SCAN.match(line)
        assert (m is None) == (FULL.match(line) is None), line
        if m is None:
            continue
        matched += 1
        text = line.decode("ascii").removesuffix("\r")
        ev = parse_line(text)
        assert type(ev) in (DecodeBatch, PrefillBatch), line
        assert parse_template(text) == ev, line
        full = FULL.match(line)
        assert parse_origin(text[:max(full.end("prefix"), 0)]) == ev.origin, line
        (rr,) = scan_block(line, 1 << 20)[0].run.replicas
        assert rr.origin.dp_rank == ev.origin.dp_rank and rr.origin.replica == ev.origin.replica
        clock = "wall" if ev.origin.log_time is None else "tod" if ev.origin.time_of_day_only else "log"
        assert rr.queue_ends == ((ev.origin.log_time, clock),) * 2 and len(rr.queue_steps) == 0
        if type(ev) is DecodeBatch:
            assert list(rr.running) == [ev.running_req] and list(rr.queue) == [ev.queue_req]
            assert list(rr.decode_top) == [ev.kv.max_device_ratio]
            assert (list(rr.accept) if rr.accept is not None else [1.0]) == [ev.accept_len or 1.0]
        else:
            assert (list(rr.new_seq), list(rr.new_token)) == ([ev.new_seq], [ev.new_token])
            assert rr.cached_tokens == (ev.cached_token or 0) and list(rr.prefill_top) == [ev.kv.max_device_ratio]
    assert matched > 5_000


def test_optional_groups_as_alternations_match_the_same_text_with_the_same_groups():
    """templates._branches rewrites every ``(...)?`` as ``(?:(...)|)`` for speed: the template pattern
    as written and as rewritten give the same match, span and groups on every corpus line and 20,000
    mutated ones; and on small patterns with classes, escapes and nesting, on random text."""
    from exporter.sources.log import templates

    written = re.compile(templates._only(templates._SOURCE, templates.SCAN_FIELDS))
    assert written.pattern != templates.SCAN.pattern and written.groupindex == templates.SCAN.groupindex
    for line in _template_lines():
        a, b = written.match(line), templates.SCAN.match(line)
        assert (a is None) == (b is None), line
        if a is not None:
            assert a.span() == b.span() and a.groups() == b.groups(), line
    rng = random.Random(3)
    for pattern in (rb"a(?:b(?P<x>c)?)?d", rb"(x[)?(]?)?y", rb"(?P<p>\(\d)?\)?(?:e|f(g)?)?h??", rb"(?:[]a]+)?z"):
        rewritten = re.compile(templates._branches(pattern))
        assert rewritten.pattern != pattern and rewritten.groups == re.compile(pattern).groups
        for _ in range(3000):
            text = bytes(rng.choice(b"abcdefghxyz()[]?1") for _ in range(rng.randrange(8)))
            a, b = re.match(pattern, text), rewritten.match(text)
            assert (a is None) == (b is None) and (a is None or (a.span(), a.groups()) == (b.span(), b.groups()))


def test_a_line_that_is_no_template_is_left_to_the_parser():
    for line in _template_lines():
        text = line.decode("utf-8", "replace")
        if SCAN.match(line) is None:
            assert parse_template(text) is None, line


def test_worker_count_uses_one_core_for_small_inputs(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    assert bulk_ingest.worker_count(bulk_ingest.PARALLEL_MIN_BYTES - 1) == 0
    assert bulk_ingest.worker_count(bulk_ingest.PARALLEL_MIN_BYTES) == 2
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    assert bulk_ingest.worker_count(1 << 40) == 0


def test_every_title_the_parser_looks_for_holds_a_title_token():
    """The bulk path counts a line without any TITLE_TOKENS as no scheduler line, unparsed: every text
    that parser._parse looks for must hold one (a new line kind there must be added to the tokens)."""
    import ast
    import inspect

    from exporter.sources.log import parser
    from exporter.sources.log.bulk import TITLE_TOKENS

    tree = ast.parse(inspect.getsource(parser._parse))
    looked_for = {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant)
                  and isinstance(node.value, str) and len(node.value) >= 4}
    assert "Decode batch" in looked_for and "server_args=" in looked_for
    for text in looked_for - {"Req "}:  # "Req " only extends "Time Stats(" backwards
        assert any(token.decode() in text for token in TITLE_TOKENS), f"{text!r} holds no TITLE_TOKENS entry"
    calls = {node.func.attr for node in ast.walk(tree) if isinstance(node, ast.Call)
             and isinstance(node.func, ast.Attribute)}
    assert calls <= {"find", "startswith"}, f"_parse finds titles by other means now: {calls}"


def test_no_template_line_is_longer_than_the_least_line_limit():
    """Every field at its longest still fits TEMPLATE_MAX_BYTES (so the scan skips the length check)."""
    from exporter.limits import MAX_LINE_BYTES_MIN
    from exporter.sources.log.templates import TEMPLATE_MAX_BYTES

    c, x, r = "9" * 15, "9" * 15 + "." + "9" * 17, "0" * 15 + "." + "9" * 17  # count, number, ratio
    prefix = f"({'A' * 64} pid={'9' * 10}) [2026-09-13 16:00:00.{'9' * 9} {'A' * 127}] "
    decode = (f"Decode batch [{c}]. #running-req: {c}, #full token: {c}, full token usage: {r}, #swa token: {c}, "
              f"swa token usage: {r}, pre-allocated usage: {r}, #prealloc-req: {c}, #transfer-req: {c}, "
              f"#retracted-req: {c}, accept len: {x}, accept rate: {x}, musa graph: False, "
              f"gen throughput (token/s): {x}, largest-len: {c}, #queue-req: {c},. \r")
    prefill = (f"Prefill batch [{c}]. #new-seq: {c}, #new-token: {c}, #cached-token: {c}, cache hit rate: {x}%, "
               f"full token usage: {r}, mamba usage: {r}, #running-req: {c}, #queue-req: {c}, #prealloc-req: {c}, "
               f"#inflight-req: {c}, #pending-token: {c}, musa graph: False, input throughput (token/s): {x},. \r")
    for body in (decode, prefill):
        line = (prefix + body).encode()
        assert SCAN.match(line), body
        assert len(line) <= TEMPLATE_MAX_BYTES <= MAX_LINE_BYTES_MIN


@pytest.mark.parametrize("slot_bytes", [bulk_ingest.SLOT_BYTES, 3000])
def test_blocks_reach_the_workers_through_shared_memory_or_else_pickled(tmp_path, monkeypatch, slot_bytes):
    """On worker processes a block goes through a shared-memory slot; one larger than a slot is
    pickled instead; both give the per-line path's /metrics."""
    submitted = []
    real_start = bulk_ingest._start_pool

    def start(workers, shared):
        pool = real_start(workers, shared)
        real_submit = pool.submit

        def submit(fn, *args):
            submitted.append(fn.__name__)
            return real_submit(fn, *args)

        pool.submit = submit
        return pool

    monkeypatch.setattr(bulk_ingest, "_start_pool", start)
    monkeypatch.setattr(bulk_ingest, "SLOT_BYTES", slot_bytes)
    monkeypatch.setattr(file_module, "READ_CHUNK", 1024)
    path = tmp_path / "corpus.log"
    path.write_bytes(b"\n".join(corpus_lines()[:3000]) + b"\n")
    _same(path, monkeypatch, workers=2)
    if slot_bytes >= 4 * 1024 * 2:
        assert set(submitted) == {"_scan_slot"}
    else:  # blocks of about 4 KiB: some fit a 3,000-byte slot, most do not
        assert {"_scan_slot", "scan_block"} <= set(submitted)


@pytest.mark.parametrize("workers", [2, 0])
def test_the_bulk_path_reads_several_chunks_at_a_time(tmp_path, monkeypatch, workers):
    """With worker processes the tailer reads READ_CHUNK times the bulk sink's read_chunks at a time
    (fewer, larger blocks); scanning in this process, READ_CHUNK (less memory)."""
    sizes = []
    real = bulk_ingest.BulkIngest.feed_block

    def spy(self, block, max_line_bytes, file_stats):
        sizes.append(len(block))
        return real(self, block, max_line_bytes, file_stats)

    monkeypatch.setattr(bulk_ingest.BulkIngest, "feed_block", spy)
    monkeypatch.setattr(file_module, "READ_CHUNK", 4096)
    path = tmp_path / "big.log"
    lines = corpus_lines()[:2000]
    path.write_bytes(b"\n".join(lines) + b"\n")
    _same(path, monkeypatch, workers=workers)
    chunks = bulk_ingest.BulkIngest.READ_CHUNKS_WITH_WORKERS if workers else 1
    assert chunks == 4 or not workers
    longest = max(map(len, lines)) + 1  # a block ends at a line's end (real server_args lines: 20 KB)
    assert len(sizes) > 3 and max(sizes) > 4096 * (chunks - 1) and all(n <= 4096 * chunks + longest for n in sizes[:-1])


def test_a_run_that_fails_to_apply_is_counted_and_loses_nothing_else(tmp_path, monkeypatch):
    """Defence in depth, as for one event: a run whose application raises is logged and its lines are
    counted as malformed, refused for ``error``; the next block is still applied."""
    from exporter.scheduler import store as store_module

    real = store_module.apply_run
    calls = []

    def broken_once(states, run, wall):
        calls.append(run)
        if len(calls) == 1:
            raise OverflowError("boom")
        return real(states, run, wall)

    monkeypatch.setattr(store_module, "apply_run", broken_once)
    monkeypatch.setattr(file_module, "READ_CHUNK", 256)
    monkeypatch.setattr(bulk_ingest.BulkIngest, "READ_CHUNKS_WITH_WORKERS", 1)
    line = ("[2026-09-13 16:00:0{s} TP0] Decode batch, #running-req: 3, #token: 30, token usage: 0.10, "
            "cuda graph: False, gen throughput (token/s): 10.00, #queue-req: 1\n")
    path = tmp_path / "two-blocks.log"
    path.write_text(line.format(s=0) + line.format(s=1))  # about 160 bytes each: one block each
    text = exposition(path, bulk=True, monkeypatch=monkeypatch)
    assert len(calls) == 2
    assert 'sglang_exporter_log_lines_total{kind="decode",result="malformed"} 1.0' in text
    assert 'sglang_exporter_log_lines_total{kind="decode",result="parsed"} 1.0' in text
    assert 'sglang_exporter_log_rejected_lines_total{reason="error"} 1.0' in text


# --- SGLang Omni: its lines go through the stage attribution, line by line --------------------------

OMNI_LOGS = ROOT / "tests" / "omni"
_SHIM_TOKEN = re.compile(r"\[[^\[\]/]{1,200}/[^\[\]]{1,200}\] ")
_OMNI_FORMAT = re.compile(rb"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} \[[A-Z]+\] ")  # Omni's own line format


def _omni_variants() -> dict[str, list[str]]:
    """The Omni test logs' lines, and logs made from them: without the shim's token (Omni's stock
    format: one stage, so every line is its stage's, and two stages, so none is), and one stage whose
    log ends before its pipeline started (the held KV line decided at the end)."""
    shim = (OMNI_LOGS / "two-stage-shim.log").read_text().splitlines()
    one = [_SHIM_TOKEN.sub("", ln, count=1) for ln in shim if "talker_ar" not in ln]
    return {
        "pr712": (OMNI_LOGS / "pr712-omni-0.5.8-excerpt.log").read_text().splitlines(),
        "shim-two-stages": shim,
        "stock-two-stages": [_SHIM_TOKEN.sub("", ln, count=1) for ln in shim],
        "stock-one-stage": one,
        "stock-one-stage-unsettled": [ln for ln in one if "MultiProcessPipelineRunner started" not in ln
                                      and "Coordinator" not in ln and "batch" not in ln and "Retract" not in ln],
    }


@pytest.mark.parametrize("name", sorted(_omni_variants()))
@pytest.mark.parametrize("chunk", [1 << 20, 700])
def test_omni_logs_mixed_with_plain_sglang_lines_give_the_same_metrics(tmp_path, monkeypatch, name, chunk):
    """SGLang Omni's lines (its own, and SGLang's in Omni's format) need the stage attribution: a block
    holding one is read line by line through Ingest.feed; plain SGLang template lines between them (blocks
    of their own in 700-byte reads, on worker processes) pass the attribution unchanged either way; a
    held start-up line is decided at the end of the recording. Same /metrics, same line counts."""
    lines = _omni_variants()[name]
    # plain SGLang lines only: the corpus's real Omni logs (064-066) would bring stages of their own
    plain = [ln.decode() for ln in corpus_lines() if any(t in ln for t in TEMPLATE_TITLES)
             and not _OMNI_FORMAT.match(ln)]
    rng = random.Random(name)
    rows = []
    for ln in lines:
        rows += [rng.choice(plain) for _ in range(rng.randrange(0, 12))]
        rows.append(ln)
    rows += [rng.choice(plain) for _ in range(30)]
    monkeypatch.setattr(file_module, "READ_CHUNK", chunk)
    for text_rows, label in ((lines, "alone"), (rows, "mixed")):
        path = tmp_path / f"{name}-{label}.log"
        path.write_text("\n".join(text_rows) + "\n")
        text = _same(path, monkeypatch, workers=2 if chunk < 1 << 20 else 0)
        if name == "shim-two-stages":
            assert 'phase="decode",stage="talker_ar"}' in text and 'phase="decode",stage="thinker"}' in text
        if name == "stock-one-stage":
            assert 'sglang_scheduler_batches_total{dp_rank="0",phase="prefill",stage="thinker"} 4.0' in text
        if name == "stock-two-stages":
            assert 'kind="decode",result="unattributed"} 8.0' in text
        if name == "stock-one-stage-unsettled":
            assert 'kind="kv_allocation",result="parsed"} 1.0' in text and 'stage="thinker"' in text


def test_omnis_own_lines_are_never_counted_unparsed():
    """A line without any SGLang title is counted as no scheduler line without the parser, unless it may be
    in SGLang Omni's format (OMNI_HINT, the parser's own cheap test, in bytes): every Omni line the parser
    reads holds the hint."""
    from exporter.sources.log.bulk import OMNI_HINT

    texts = [ln for lines in _omni_variants().values() for ln in lines]
    texts += ["2026-08-20 10:15:01,902 [INFO] sglang_omni.pipeline.stage.runtime: Stage thinker started",
              "\u0662\u0660\u0662\u0666-08-20 10:15:01,\u0669\u0660\u0662 [INFO] x: Stage thinker started"]
    read = 0
    for text in texts:
        ev = parse_line(text)
        if ev is not None and getattr(ev, "origin", None) is not None and ev.origin.task is not None:
            read += 1
            assert OMNI_HINT.search(text.encode()) is not None, text
    assert read >= 20


def test_the_one_search_for_titles_finds_what_a_test_per_token_finds():
    """bulk._SUSPECT (the title tokens anchored at a rare byte, \\r, Omni's hint) finds something in a
    line exactly when one of the tokens, a \\r or the hint is there: every corpus line, and random
    lines made of pieces of the tokens (cut before and after each anchor byte)."""
    from exporter.sources.log.bulk import _SUSPECT, OMNI_HINT, TITLE_TOKENS

    def by_token(line: bytes) -> bool:
        return b"\r" in line or any(t in line for t in TITLE_TOKENS) or OMNI_HINT.search(line) is not None

    for line in corpus_lines():
        assert (_SUSPECT.search(line) is not None) == by_token(line), line
    rng = random.Random(5)
    pieces = [t[i:j] for t in TITLE_TOKENS for i in range(len(t)) for j in (i + 1, i + 3, len(t))]
    pieces += [b" ", b"x", b"\r", b",123 [", b"[", b",", b"e"]
    found = 0
    for _ in range(20_000):
        line = b"".join(rng.choice(pieces) for _ in range(rng.randrange(1, 6)))
        assert (_SUSPECT.search(line) is not None) == by_token(line), line
        found += by_token(line)
    assert 1_000 < found < 19_000


# --- the report reads template lines without the parser, to the same document -----------------------

def _report_json(path, monkeypatch, fast: bool) -> str:
    import json

    from report_support import report_files

    from exporter.sources.log import ingest

    with monkeypatch.context() as m:
        if not fast:
            m.setattr(ingest, "parse_template", lambda line: None)
        doc = report_files(path)
    return json.dumps(doc, sort_keys=True, default=str)


@pytest.mark.parametrize("source", ["corpus", "fuzz", "bench", "omni"])
def test_the_report_is_the_same_document_with_and_without_the_template_reader(tmp_path, monkeypatch, source):
    """The per-line path (the sidecar's ingest, which the report reads through) reads a template line
    with the pattern (templates.parse_template) instead of the parser: the same JSON document either
    way, SGLang Omni's logs (stage attribution) included."""
    path = tmp_path / f"{source}.log"
    if source == "corpus":
        path.write_bytes(b"\n".join(corpus_lines()) + b"\n")
    elif source == "fuzz":
        path.write_bytes(fuzzed_log(5, 6000))
    elif source == "omni":
        plain = [ln.decode() for ln in corpus_lines() if any(t in ln for t in TEMPLATE_TITLES)][:400]
        rows = _omni_variants()["stock-one-stage"] + plain + _omni_variants()["shim-two-stages"]
        path.write_text("\n".join(rows) + "\n")
    else:
        _genlog().build(str(path), 20_000, str(ROOT / "tests" / "corpus"))
    assert _report_json(path, monkeypatch, fast=True) == _report_json(path, monkeypatch, fast=False)


_REAL_SCAN_SLOT = bulk_ingest._scan_slot
_DEATH_MARKER = ""


def _exit_in_first_worker_scan(slot, length, max_line_bytes):
    """A block scanner for worker processes: the first call in any worker ends that process abruptly
    (as the kernel's OOM killer or a ``kill -9`` would: ``_DEATH_MARKER`` is created then); every later
    call scans."""
    try:
        os.close(os.open(_DEATH_MARKER, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return _REAL_SCAN_SLOT(slot, length, max_line_bytes)
    os._exit(9)


def test_a_worker_process_that_dies_loses_nothing(tmp_path, monkeypatch, caplog):
    """A worker killed mid-run (OOM killer, kill -9) breaks the whole pool: every block still with a
    worker, and every later one, is scanned in this process instead, with a warning, and the output is
    the per-line path's, not a BrokenProcessPool traceback and no output."""
    monkeypatch.setattr(sys.modules[__name__], "_DEATH_MARKER", str(tmp_path / "died"))
    monkeypatch.setattr(bulk_ingest, "_scan_slot", _exit_in_first_worker_scan)
    monkeypatch.setattr(file_module, "READ_CHUNK", 4096)
    path = tmp_path / "corpus.log"
    path.write_bytes(b"\n".join(corpus_lines()[:4000]) + b"\n")
    with caplog.at_level("WARNING", logger="exporter.sources.log.bulk_ingest"):
        _same(path, monkeypatch, workers=2)
    assert (tmp_path / "died").exists()
    assert [r.getMessage() for r in caplog.records if "worker process" in r.getMessage()]


def test_a_pool_found_broken_when_a_block_is_handed_over_loses_nothing(tmp_path, monkeypatch):
    """The pool may notice a dead worker first when the next block is submitted (``submit`` raises
    BrokenProcessPool): that block and the pending ones are scanned in this process."""
    from concurrent.futures.process import BrokenProcessPool

    real_start = bulk_ingest._start_pool
    calls = []

    def start(workers, shared):
        pool = real_start(workers, shared)
        real_submit = pool.submit

        def submit(fn, *args):
            calls.append(fn)
            if len(calls) == 3:
                raise BrokenProcessPool("a child process terminated abruptly")
            return real_submit(fn, *args)

        pool.submit = submit
        return pool

    monkeypatch.setattr(bulk_ingest, "_start_pool", start)
    monkeypatch.setattr(file_module, "READ_CHUNK", 4096)
    path = tmp_path / "corpus.log"
    path.write_bytes(b"\n".join(corpus_lines()[:4000]) + b"\n")
    _same(path, monkeypatch, workers=2)
    assert len(calls) == 3


def test_an_interrupted_one_shot_stops_without_scanning_what_is_pending(tmp_path, monkeypatch):
    """Ctrl-C during a one-shot (KeyboardInterrupt in this process; the workers get SIGINT too): the
    read stops at once, with the interrupt itself. Closing the pool does not wait for, apply or re-raise
    the blocks still with the workers (their own KeyboardInterrupt tracebacks, chained, and a
    delay)."""
    from exporter.scheduler.state import SchedulerStates
    from exporter.scheduler.store import SchedulerStore
    from exporter.sources.log.source import LogSource

    real_feed, real_apply = bulk_ingest.BulkIngest.feed_block, bulk_ingest.BulkIngest._apply
    events = []

    def feed_block(self, *args):
        n = real_feed(self, *args)
        events.append("fed")
        if events.count("fed") == 8:
            raise KeyboardInterrupt
        return n

    def apply(self, *args):
        events.append("applied")
        return real_apply(self, *args)

    monkeypatch.setattr(bulk_ingest.BulkIngest, "feed_block", feed_block)
    monkeypatch.setattr(bulk_ingest.BulkIngest, "_apply", apply)
    monkeypatch.setattr(file_module, "READ_CHUNK", 1024)
    monkeypatch.setattr("exporter.sources.log.source.worker_count", lambda total: 2)
    path = tmp_path / "corpus.log"
    path.write_bytes(b"\n".join(corpus_lines()[:3000]) + b"\n")
    source = LogSource([str(path)], SchedulerStore(SchedulerStates(40)), from_beginning=True, bulk=True)
    with pytest.raises(KeyboardInterrupt):
        source.read_all()
    assert events[-1] == "fed" and events.count("applied") == 8 - 2 * 2
    assert source.ingest._pool is None and not source.ingest._pending


def test_a_block_in_shared_memory_is_not_also_held_while_pending(tmp_path, monkeypatch):
    """A block handed over in a slot is held there only (the slot until the block is applied), not also
    as bytes in the pending queue: the main process holds no more than the slots (with 4 workers, 9
    blocks of 4 MiB less). Start-up lines in the blocks send some through the per-line path, which reads
    them back from their slot; the /metrics text is the per-line path's."""
    held = []
    real = bulk_ingest.BulkIngest._apply_next

    def spy(self):
        held.append(sum(len(entry[1]) for entry in self._pending if entry[1] is not None))
        return real(self)

    monkeypatch.setattr(bulk_ingest.BulkIngest, "_apply_next", spy)
    monkeypatch.setattr(file_module, "READ_CHUNK", 2048)
    path = tmp_path / "fuzz.log"
    path.write_bytes(fuzzed_log(11, 3000) + b"\n".join(_STARTUP_SAMPLE) + b"\n" + fuzzed_log(12, 3000))
    _same(path, monkeypatch, workers=2)
    assert len(held) > 10 and set(held) == {0}


_STARTUP_SAMPLE = [line for line in corpus_lines() if b"max_total_num_tokens=" in line][:3]


_HOLD_WORKERS = """
import sys, time
from exporter.scheduler.state import SchedulerStates
from exporter.scheduler.store import SchedulerStore
from exporter.sources.log.bulk_ingest import BulkIngest
from exporter.sources.log.stats import LogStats
stats = LogStats()
ingest = BulkIngest(SchedulerStore(SchedulerStates(40)), stats, workers=2)
ingest.feed_block(open(sys.argv[1], "rb").read().rstrip(b"\\n"), 1 << 20, stats.register_file(sys.argv[1]))
ingest.drain()
print(" ".join(str(p) for p in ingest._pool._processes), flush=True)
time.sleep(60)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"  # a zombie has ended
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="Linux only (PR_SET_PDEATHSIG)")
@pytest.mark.parametrize("sig", ["SIGTERM", "SIGKILL"])
def test_worker_processes_end_with_a_killed_one_shot(tmp_path, sig):
    """A one-shot killed without its cleanup (SIGTERM's default action: `timeout`, a Job's deadline;
    SIGKILL; the OOM killer) takes its worker processes with it: they used to wait for work forever,
    each holding its memory."""
    import signal
    import subprocess
    import time

    path = tmp_path / "corpus.log"
    path.write_bytes(b"\n".join(corpus_lines()[:2000]) + b"\n")
    proc = subprocess.Popen([sys.executable, "-c", _HOLD_WORKERS, str(path)], stdout=subprocess.PIPE, cwd=ROOT)
    try:
        workers = [int(p) for p in proc.stdout.readline().split()]
        assert len(workers) == 2 and all(_alive(p) for p in workers)
    finally:
        proc.send_signal(getattr(signal, sig))
        proc.wait(10)
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = [p for p in workers if _alive(p)]
    for p in left:
        os.kill(p, signal.SIGKILL)
    assert not left


def test_replayed_tokens_and_mixed_chunks_count_alike_by_both_paths(tmp_path, monkeypatch):
    """SGLang 0.5.21's ``#replay-token`` (tokens computed again to replay a sliding-window state) is
    counted in ``prefill_computed_tokens_total``: the bulk path took the line from the parser and
    dropped it (21,650 where the per-line path counted 22,250 on these 50 lines) while each path kept
    its own counting rule. Both now call :mod:`exporter.scheduler.rules`. With mixed chunks a run of
    Prefill lines is now applied as a run too, with each line's ``#running-req`` (hand count: 433 >=
    512 - 90 ends in a chunk, so the next line admits 2 of its 3)."""
    replay = ("[2026-12-01 21:20:{:02d}] Prefill batch, #new-seq: 3, #new-token: 433, #cached-token: 0, "
              "token usage: 0.66, #running-req: 9, #queue-req: 97, #pending-token: 14745, #replay-token: 12, "
              "cpu graph: False, input throughput (token/s): 7997.04")
    path = tmp_path / "replay.log"
    path.write_text("\n".join(replay.format(i) for i in range(50)) + "\n")
    text = _same(path, monkeypatch)
    assert value(text, "sglang_scheduler_prefill_computed_tokens_total", dp_rank="0", stage="") == 50 * (433 + 12)

    plain = ("[2026-12-01 21:21:{:02d}] Prefill batch, #new-seq: 3, #new-token: 433, #cached-token: 0, "
             "token usage: 0.66, #running-req: {}, #queue-req: 97, cpu graph: False, input throughput (token/s): 7997.04")
    lines = ["[2026-12-01 21:19:00] server_args=ServerArgs(model_path='m', chunked_prefill_size=512, "
             "enable_mixed_chunk=True, decode_log_interval=40)"]
    lines += [plain.format(i, 90 if i % 2 == 0 else 9) for i in range(40)]
    path = tmp_path / "mixed.log"
    path.write_text("\n".join(lines) + "\n")
    text = _same(path, monkeypatch)
    # #running-req 90 (ends in a chunk), then 9 (admits 3 - 1), 20 times.
    assert value(text, "sglang_scheduler_admitted_requests_total", dp_rank="0", stage="") == 20 * 3 + 20 * 2
    one_shot = subprocess.run([sys.executable, "-m", "exporter", "--one-shot", "--log.path", str(path)],
                              capture_output=True, text=True, timeout=120, check=True).stdout
    assert value(one_shot, "sglang_exporter_log_template_lines_total") == 40  # as a run, not line by line

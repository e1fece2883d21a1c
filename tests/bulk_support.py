"""The two ways of reading a recorded log, side by side, and logs to run them on (tests/test_log_bulk.py).

``exposition(path, bulk=...)`` reads one file as ``--one-shot`` does, through the per-line path (the
reference: parser, then ``SchedulerStore.apply`` per event) or the bulk path (templates, columns,
worker processes), with a fixed clock, and returns the whole ``/metrics`` text less the collectors'
durations. ``fuzzed_log`` mutates real corpus lines, with mutations aimed at the template pattern
(every field's digits, signs, exponents, non-ASCII digits, order, rank tags, dates, line ends).
"""

from __future__ import annotations

import random
import re
from pathlib import Path

from conftest import corpus_files
from prometheus_client import generate_latest

from exporter.cli import build_registry
from exporter.scheduler.state import SchedulerStates
from exporter.scheduler.store import SchedulerStore
from exporter.sources.log import source as log_source_module
from exporter.sources.log.source import LogSource

WALL = 1_800_000_000.0
#: Lines that differ between two reads of the same log by design: the collectors' own timings, and the
#: count of lines the fast path's pattern read (a property of the path that read them: the bulk path
#: hands a line holding a \r, and the lines of a part it cannot apply as a run, to the parser).
_DURATION = re.compile(rb"^(?:sglang_exporter_collector_duration_seconds\{|sglang_exporter_log_template_lines_total ).*\n",
                       re.M)


def exposition(path: Path | str, bulk: bool, workers: int = 0, max_line_bytes: int = 1 << 20,
               decode_log_interval: int = 40, chunked_prefill_size: int | None = None, monkeypatch=None) -> str:
    """The one-shot ``/metrics`` text of ``path`` by one path; ``workers`` forces the worker count."""
    return read_log(path, bulk, workers, max_line_bytes, decode_log_interval, chunked_prefill_size, monkeypatch)[0]


def read_log(path: Path | str, bulk: bool, workers: int = 0, max_line_bytes: int = 1 << 20,
             decode_log_interval: int = 40, chunked_prefill_size: int | None = None,
             monkeypatch=None) -> tuple[str, list[tuple[str, int, int]]]:
    """:func:`exposition`, and each file's ``(path, lines, scheduler lines)`` (what one-shot's exit 3
    and its warnings read)."""
    if monkeypatch is not None:
        monkeypatch.setattr(log_source_module, "worker_count", lambda total: workers)
    store = SchedulerStore(SchedulerStates(decode_log_interval, clock=lambda: WALL,
                                           chunked_prefill_size=chunked_prefill_size))
    source = LogSource([str(path)], store, from_beginning=True, max_line_bytes=max_line_bytes,
                       clock=lambda: WALL, bulk=bulk)
    source.read_all()
    files = [(p, fs.lines, fs.scheduler_lines) for p, fs in source.stats.snapshot().files.items()]
    return _DURATION.sub(b"", generate_latest(build_registry(store, source, None))).decode(), files


def corpus_lines() -> list[bytes]:
    """Every line of the corpus (header lines excluded), as bytes."""
    out = []
    for p in corpus_files():
        lines = p.read_bytes().split(b"\n")
        out += [line for i, line in enumerate(lines) if not (i < 3 and line.startswith(b"# "))]
    return out


TEMPLATE_TITLES = (b"Decode batch", b"Prefill batch")
_JUNK = [b"\r", b"\x00", b"\xff", b"\xd9\xa3", b", ", b": ", b"[", b"]", b"-", b"+", b"e5", b"_", b"%", b".",
         b" ", b"\t", b"nan", b"inf", b"9" * 16, b"0" * 15, "\u0663".encode()]
_TAGS = [b"", b" TP0", b" DP1 TP1", b" DP007 TP3 EP3", b" PP1 TP2", b" ATTN_CP1 MOE_DP2 TP0", b" DP1234567",
         b" XP1", b" DP3 gpu_id=2"]
_STARTUP = [
    b"[2026-09-13 16:00:00 TP0] server_args=ServerArgs(model_path='m', decode_log_interval=10, "
    b"chunked_prefill_size=8192, max_running_requests=None)",
    b"[2026-09-13 16:00:00 TP0] max_total_num_tokens=1000000, chunked_prefill_size=4096, max_prefill_tokens=16384, "
    b"max_running_requests=2048, context_len=131072, available_gpu_mem=10.0 GB",
    b"[2026-09-13 16:00:00 DP1 TP1] max_total_num_tokens=500000, chunked_prefill_size=-1, max_prefill_tokens=16384, "
    b"max_running_requests=1024, context_len=65536",
]


def mutate(rng: random.Random, real: list[bytes], templated: list[bytes]) -> bytes:
    """One mutated line: a real line, often a template-shaped one, with 0-3 mutations."""
    line = rng.choice(templated if rng.random() < 0.7 else real)
    for _ in range(rng.choice((0, 0, 1, 1, 2, 3))):
        op = rng.randrange(9)
        at = rng.randrange(len(line) + 1)
        if op == 0:  # one number changed: digits, sign, exponent, length
            nums = list(re.finditer(rb"\d+(?:\.\d+)?", line))
            if nums:
                m = rng.choice(nums)
                new = rng.choice([b"0", b"1", b"00", b"0.0", b"1.00", b"-1", b"1e3", b"9" * 15, b"9" * 16,
                                  b"123456789012345.5", b"0.123456789012345678", b"\xd9\xa3", b"1_0", b"5%", b"7.",
                                  str(rng.randrange(10 ** rng.randrange(1, 16))).encode()])
                line = line[:m.start()] + new + line[m.end():]
        elif op == 1:  # rank tags replaced
            line = re.sub(rb"((?: (?:DP|PP|ATTN_CP|MOE_DP|TP|EP)\d+)*)\] ", rng.choice(_TAGS) + b"] ", line, count=1)
        elif op == 2:  # two fields swapped
            parts = line.split(b", ")
            if len(parts) > 3:
                i, j = rng.randrange(1, len(parts)), rng.randrange(1, len(parts))
                parts[i], parts[j] = parts[j], parts[i]
                line = b", ".join(parts)
        elif op == 3:  # a field dropped or doubled
            parts = line.split(b", ")
            if len(parts) > 2:
                i = rng.randrange(1, len(parts))
                parts[i:i + 1] = [] if rng.random() < 0.5 else [parts[i], parts[i]]
                line = b", ".join(parts)
        elif op == 4:
            line = line[:at] + rng.choice(_JUNK) + line[at:]
        elif op == 5:
            line = line[:at]
        elif op == 6:  # date or time changed
            line = re.sub(rb"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d",
                          rng.choice([b"2026-13-01 00:00:00", b"2026-02-30 25:61:61", b"2024-01-01 00:00:00.5",
                                      b"2026-09-13 16:00:01.123456", b"1999-12-31 23:59:59"]), line, count=1)
        elif op == 7:  # line ends
            line += rng.choice([b"\r", b", ", b",", b".", b" ,", b",.", b"\r\r", b" "])
        else:  # another line spliced in
            other = rng.choice(real)
            line = line[:at] + other[rng.randrange(len(other) + 1):]
    return line.replace(b"\n", b" ")


def fuzzed_log(seed: int, lines: int) -> bytes:
    """``lines`` lines: mutated corpus lines, start-up lines now and then, and real lines between."""
    rng = random.Random(seed)
    real = [line for line in corpus_lines() if line.strip()]
    templated = [line for line in real if any(t in line for t in TEMPLATE_TITLES)]
    out = []
    for _ in range(lines):
        r = rng.random()
        if r < 0.002:
            out.append(rng.choice(_STARTUP))
        elif r < 0.2:
            out.append(rng.choice(real))
        else:
            out.append(mutate(rng, real, templated))
    return b"\n".join(out) + (b"\n" if rng.random() < 0.8 else b"")

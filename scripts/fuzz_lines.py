#!/usr/bin/env python3
"""Long fuzz run of the parser and the tailer (issue 3), and of the bulk path against it (issue 17).

Mutations as in tests/test_tail_fuzz.py: cut, spliced with another line, junk bytes inserted (CR,
NUL, invalid UTF-8, separators), re-encoded as Latin-1, duplicated, plus, for the bulk path, numbers
and rank tags rewritten. The lines are written to a real file in random-sized pieces and followed by
the real :class:`exporter.sources.log.file.Tailer`; each line is also given to the parser directly.
Reported: lines generated, lines the tailer counted, exceptions (a raise anywhere, or a parser error
that parse_line caught), counter decreases. With ``--bulk``, the same file is then read once more
the way ``--one-shot`` reads it, through the bulk path on worker processes (exporter/sources/log/bulk.py),
and once through the per-line path (the reference); the two /metrics texts must be identical.

    python scripts/fuzz_lines.py --lines 1000000 --seed 1
    python scripts/fuzz_lines.py --lines 1000000 --seed 2 --bulk
"""

from __future__ import annotations

import argparse
import io
import random
import re
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from exporter.sources.log.parser import Malformed, parse_line  # noqa: E402
from exporter.sources.log.ingest import Ingest  # noqa: E402
from exporter.scheduler.state import SchedulerStates  # noqa: E402
from exporter.scheduler.store import SchedulerStore
from exporter.sources.log.file import Tailer  # noqa: E402

MAX_LINE_BYTES = 1 << 16  # the tailer's line limit here; a longer line is dropped and counted oversized
TITLES = (b"batch", b"etract", b"max_total_num_tokens", b"server_args", b"Time Stats", b"TimeStats",
          b"out of memory")
JUNK = [b"\r", b"\r\n", b"\x00", b"\xff", b"\xc3", b"\xe2\x82", b", ", b": ", b"[", b"]", b"#running-req: ",
        b"nan", b"-1", b"1e309", b"\t", "\u2028".encode()]


def corpus_lines(corpus: Path) -> list[bytes]:
    out = set()
    for p in sorted(corpus.glob("*.log")):
        out |= {line for line in p.read_bytes().split(b"\n") if any(t in line for t in TITLES)}
    return sorted(out)


NUMBERS = [b"0", b"1", b"00", b"1.00", b"-1", b"1e3", b"9" * 15, b"9" * 16, b"0.123456789012345678",
           b"\xd9\xa3", b"1_0", b"5%", b"7."]
TAGS = [b"", b" TP0", b" DP1 TP1", b" DP007 TP3 EP3", b" PP1 TP2", b" DP1234567", b" XP1"]


def mutate(rng: random.Random, real: list[bytes]) -> bytes:
    line = rng.choice(real)
    for _ in range(rng.randrange(4)):
        op = rng.randrange(7)
        if op == 5:  # a number rewritten: what the bulk path's templates must accept or refuse exactly
            nums = list(re.finditer(rb"\d+(?:\.\d+)?", line))
            if nums:
                m = rng.choice(nums)
                line = line[:m.start()] + rng.choice(NUMBERS) + line[m.end():]
            continue
        if op == 6:  # rank tags rewritten
            line = re.sub(rb"((?: (?:DP|PP|ATTN_CP|MOE_DP|TP|EP)\d+)*)\] ", rng.choice(TAGS) + b"] ", line, count=1)
            continue
        at = rng.randrange(len(line) + 1)
        if op == 0:
            line = line[:at]
        elif op == 1:
            other = rng.choice(real)
            line = line[:at] + other[rng.randrange(len(other) + 1):]
        elif op == 2:
            ins = rng.choice(JUNK) if rng.random() < 0.7 else rng.randbytes(rng.randrange(1, 9))
            line = line[:at] + ins.replace(b"\n", b"") + line[at:]
        elif op == 3:
            line = line.decode("utf-8", "replace").encode("latin-1", "replace")
        else:
            line = line[:at] + line
    return line.replace(b"\n", b" ")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--corpus", type=Path, default=ROOT / "tests" / "corpus")
    ap.add_argument("--bulk", action="store_true",
                    help="also read the file through the bulk path and the per-line path; they must agree")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    real = corpus_lines(args.corpus)
    if not real:
        print(f"no corpus lines in {args.corpus}", file=sys.stderr)
        return 2
    exceptions = decreases = expected = expected_oversized = 0
    direct = Counter()
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "sglang.log"
        path.write_bytes(b"")
        pipeline = Ingest(SchedulerStore(SchedulerStates(40)))
        tailer = Tailer(str(path), pipeline, pipeline.stats, from_beginning=True, max_line_bytes=MAX_LINE_BYTES)
        tailer.poll()
        seen = Counter()
        done = 0
        with open(path, "ab", buffering=0) as f:
            while done < args.lines:
                batch = [mutate(rng, real) for _ in range(min(5000, args.lines - done))]
                done += len(batch)
                for line in batch:
                    try:
                        ev = parse_line(line.decode("utf-8", "replace"))
                    except Exception:
                        exceptions += 1
                        traceback.print_exc()
                        continue
                    if isinstance(ev, Malformed) and ev.reason.startswith("parser error"):
                        exceptions += 1
                        print(f"parser error {ev.reason}: {line[:200]!r}", file=sys.stderr)
                    direct[type(ev).__name__] += 1
                    if len(line) > MAX_LINE_BYTES:  # dropped whole and counted once as oversized
                        expected_oversized += 1
                        continue
                    text = line.lstrip(b"\0").decode("utf-8", "replace").removesuffix("\r")
                    expected += len([s for s in text.split("\r") if s]) if "\r" in text else 1
                data = b"\n".join(batch) + b"\n"
                pos = 0
                while pos < len(data):  # random write sizes, polled in between
                    n = rng.randrange(1, 1 << 16)
                    f.write(data[pos:pos + n])
                    pos += n
                    try:
                        tailer.poll()
                    except Exception:
                        exceptions += 1
                        traceback.print_exc()
                    now = Counter(pipeline.stats.lines)
                    decreases += sum(1 for k in seen if now[k] < seen[k])
                    seen = now
        tailer.close()
        counted = sum(pipeline.stats.lines.values())
        differences = bulk_differences(path) if args.bulk else None
    elapsed = time.monotonic() - t0
    print(f"lines generated: {args.lines}")
    print(f"lines counted by the tailer: {counted}; expected {expected} (a bare CR splits a line in two)")
    print(f"lines by result: " + ", ".join(f"{r}={sum(n for (k, rr), n in pipeline.stats.lines.items() if rr == r)}"
                                          for r in ("parsed", "malformed", "ignored")))
    print(f"oversized: {tailer.stats.oversized_lines}; expected {expected_oversized}")
    print(f"exceptions: {exceptions}")
    print(f"counter decreases: {decreases}")
    if differences is not None:
        print(f"bulk path against the per-line path: {'identical' if not differences else 'DIFFERENT'}")
        for row in differences[:20]:
            print(f"  {row}")
    print(f"seconds: {elapsed:.1f}")
    return 1 if (exceptions or decreases or counted != expected
                or tailer.stats.oversized_lines != expected_oversized or differences) else 0


def bulk_differences(path: Path) -> list[str]:
    """The /metrics lines that differ between the per-line path and the bulk path over ``path`` (read
    as --one-shot reads it; the bulk path on worker processes), collector durations aside."""
    import difflib

    from prometheus_client import generate_latest

    from exporter.cli import build_registry
    from exporter.sources.log import source as source_module
    from exporter.sources.log.source import LogSource

    source_module.worker_count = lambda total: 2
    texts = []
    for bulk in (False, True):
        store = SchedulerStore(SchedulerStates(40, clock=lambda: 0.0))
        log = LogSource([str(path)], store, from_beginning=True, clock=lambda: 0.0, bulk=bulk)
        log.read_all()
        text = generate_latest(build_registry(store, log, None)).decode()
        texts.append([row for row in io.StringIO(text).read().splitlines()
                      if not row.startswith("sglang_exporter_collector_duration_seconds")])
    return [row for row in difflib.unified_diff(*texts, lineterm="", n=0) if row[:1] in "+-"]


if __name__ == "__main__":
    sys.exit(main())

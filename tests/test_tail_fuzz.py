"""Property-based fuzzing (hypothesis) of the parser and the tailer with real corpus lines mutated:
cut, spliced, bytes inserted, encodings broken, split into random write sizes. Nothing raises,
counters never decrease, and the tailer's counts equal those of the same bytes read in one piece.
``scripts/fuzz_lines.py`` runs the same mutations over a million lines or more."""

from __future__ import annotations

from collections import Counter

from conftest import corpus_files
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from exporter.sources.log.parser import Malformed, parse_line
from exporter.sources.log.ingest import Ingest
from exporter.scheduler.state import SchedulerStates
from exporter.scheduler.store import SchedulerStore
from exporter.sources.log.file import Tailer

REAL = sorted({line for p in corpus_files() for line in p.read_bytes().split(b"\n")
               if any(t in line for t in (b"batch", b"etract", b"max_total_num_tokens", b"server_args",
                                           b"Time Stats", b"TimeStats", b"out of memory"))})
JUNK = [b"\r", b"\r\n", b"\x00", b"\xff", b"\xc3", b"\xe2\x82", b", ", b": ", b"[", b"]", b"#running-req: ",
        b"nan", b"-1", b"1e309", b"\t", "é".encode("latin-1"), "\u2028".encode(), b"\n"]


@st.composite
def mutated_line(draw) -> bytes:
    line = draw(st.sampled_from(REAL))
    for _ in range(draw(st.integers(0, 3))):
        op = draw(st.sampled_from(["cut", "splice", "insert", "latin1", "dup"]))
        at = draw(st.integers(0, len(line)))
        if op == "cut":
            line = line[:at]
        elif op == "splice":
            other = draw(st.sampled_from(REAL))
            line = line[:at] + other[draw(st.integers(0, len(other))):]
        elif op == "insert":
            line = line[:at] + draw(st.sampled_from(JUNK) | st.binary(max_size=8)) + line[at:]
        elif op == "latin1":
            line = line.decode("utf-8", "replace").encode("latin-1", "replace")
        else:
            line = line[:at] + line
    return line


def _mutated_text(data: bytes) -> str:
    return data.decode("utf-8", "replace")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(mutated_line(), min_size=1, max_size=30))
def test_parser_never_raises_and_counters_never_decrease(lines):
    p = Ingest(SchedulerStore(SchedulerStates(40)))
    before = Counter(p.stats.lines)
    for line in lines:
        for text in _mutated_text(line).split("\n"):
            ev = parse_line(text)
            assert ev is None or isinstance(ev, Malformed) or ev.origin is not None
            assert not (isinstance(ev, Malformed) and ev.reason.startswith("parser error")), ev
            p.feed([text])
            now = Counter(p.stats.lines)
            assert all(now[k] >= before[k] for k in before), "a counter decreased"
            before = now
            for s in p.store.states.schedulers.values():
                for name in ("retractions", "prefill_batches", "decode_steps"):
                    assert s.counter(name) >= 0


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(lines=st.lists(mutated_line(), min_size=1, max_size=40), cuts=st.lists(st.integers(1, 400), max_size=40))
def test_tailer_chunking_matches_one_piece_reading(tmp_path_factory, lines, cuts):
    path = tmp_path_factory.mktemp("fuzz") / "sglang.log"
    data = b"\n".join(lines) + b"\n"
    path.write_bytes(b"")
    p = Ingest(SchedulerStore(SchedulerStates(40)))
    t = Tailer(str(path), p, p.stats, from_beginning=True, max_line_bytes=4096)
    try:
        t.poll()
        pos = 0
        seen = Counter()
        for n in [*cuts, len(data)]:  # written in random pieces, polled after each
            piece = data[pos:pos + n]
            pos += len(piece)
            with open(path, "ab") as f:
                f.write(piece)
            t.poll()
            now = Counter(p.stats.lines)
            assert all(now[k] >= seen[k] for k in seen)
            seen = now
    finally:
        t.close()
    ref = Ingest(SchedulerStore(SchedulerStates(40)))
    rt = Tailer(str(path), ref, ref.stats, from_beginning=True, max_line_bytes=4096)
    try:
        rt.poll()
    finally:
        rt.close()
    assert +p.stats.lines == +ref.stats.lines
    assert t.stats.oversized_lines == rt.stats.oversized_lines

"""Start-up on a big log: the head is searched for the server's start-up facts in small chunks, so
the command's peak memory does not grow with the log (a 64 MiB log once cost about 250 MB, and 450 MB
with one multi-byte character in its head), and the facts are found wherever the chunks cut."""

from __future__ import annotations

import pytest
from conftest import CORPUS, value
from exporter_support import Exporter

from exporter.scheduler.state import SchedulerStates
from exporter.scheduler.store import SchedulerStore
from exporter.sources.log.startfacts import STARTUP_SCAN_BYTES
from exporter.sources.log.ingest import STARTUP_LINE_MAX, Ingest

#: The real capacity line of corpus 009 (SGLang 2026) and a server_args line in SGLang's layout.
CAPACITY = next(line for line in (CORPUS / "009-startup-cudagraph-tqdm-warmup-no-rank-tag.log")
                .read_text(encoding="utf-8").splitlines() if "max_total_num_tokens=" in line).encode()
SERVER_ARGS = (b"[2026-09-13 16:05:02] server_args=ServerArgs(model_path='/models/x', tp_size=1, "
               b"decode_log_interval=20, chunked_prefill_size=2048)")
#: Real lines after the start-up (corpus 008), repeated to fill a big log.
BODY = (CORPUS / "008-retraction-storm-tokens-gained-uvicorn.log").read_bytes()
#: How much peak RSS may grow from a tiny log to a 64 MiB one ("within a few MB of idle").
SLACK_BYTES = 8 << 20


def _facts(chunks) -> SchedulerStates:
    store = SchedulerStore(SchedulerStates(40))
    Ingest(store).startup_facts(chunks)
    return store.states


def _split(data: bytes, size: int) -> list[bytes]:
    return [data[i:i + size] for i in range(0, len(data), size)]


@pytest.mark.parametrize("size", [1, 7, 64, 4096, 1 << 30])
def test_startup_facts_are_found_wherever_the_chunks_cut(size):
    head = (b"\xe2\x96\x88\xe2\x96\x88 loading \xf0\x9f\x9a\x80 w\xc3\xa9ights\r\n" + SERVER_ARGS + b"\r\n"
            + b"x" * 300 + b"\n" + CAPACITY + b"\n" + BODY[:2000])
    states = _facts(_split(head, size))
    assert states.capacity is not None and states.capacity.max_total_num_tokens == 87552
    assert states.server_args is not None and states.decode_log_interval == 20


def test_a_last_line_without_newline_is_searched_too():
    states = _facts(_split(b"junk\n" + CAPACITY, 10))
    assert states.capacity is not None and states.capacity.max_total_num_tokens == 87552


def test_a_line_longer_than_the_search_limit_is_passed_over():
    """A start-up marker inside a line of more than STARTUP_LINE_MAX bytes is no start-up line, and
    the search resumes at the next line whatever the chunking."""
    giant = b"y" * (STARTUP_LINE_MAX + 10) + CAPACITY  # one line: the marker is inside it
    for size in (1 << 16, 1 << 30):
        states = _facts(_split(giant + b"\n" + SERVER_ARGS + b"\n", size))
        assert states.capacity is None
        assert states.server_args is not None and states.decode_log_interval == 20


def _log(path, size: int, multibyte: bool) -> None:
    head = SERVER_ARGS + b"\n" + CAPACITY + b"\n"  # SGLang's order: a start opens with server_args
    if multibyte:
        head += "[2026-09-13 16:05:03] Загрузка весов модели: 模型权重 ✓\n".encode() * 100
    with open(path, "wb") as f:
        f.write(head)
        written = len(head)
        while written < size:
            f.write(BODY)
            written += len(BODY)


def _peak_rss_at_start(path) -> int:
    """Peak RSS (VmHWM, bytes) of the real command once it has opened ``path`` and applied its facts."""
    exp = Exporter("--log.path", str(path), "--gpu.enabled", "false")
    try:
        exp.wait_for(lambda m: value(m, "sglang_exporter_log_file_opens_total", path=str(path)) == 1
                     and value(m, "sglang_scheduler_max_total_tokens", stage="", dp_rank="0") == 87552,
                     "the log opened at its end and its capacity line applied")
        with open(f"/proc/{exp.proc.pid}/status") as f:
            kib = next(int(row.split()[1]) for row in f if row.startswith("VmHWM:"))
    finally:
        assert exp.terminate() == 0
    return kib << 10


def test_start_up_memory_does_not_grow_with_the_log(tmp_path):
    tiny, big, big_mb = tmp_path / "tiny.log", tmp_path / "big.log", tmp_path / "big-multibyte.log"
    _log(tiny, 0, multibyte=False)
    _log(big, STARTUP_SCAN_BYTES, multibyte=False)
    _log(big_mb, STARTUP_SCAN_BYTES, multibyte=True)
    assert big.stat().st_size >= 64 << 20
    base = _peak_rss_at_start(tiny)
    for path in (big, big_mb):
        grown = _peak_rss_at_start(path) - base
        print(f"{path.name}: peak RSS {grown / 2**20:+.1f} MiB from a tiny log's ({base / 2**20:.1f} MiB)")
        assert grown < SLACK_BYTES, f"{path.name}: peak RSS {grown / 2**20:.1f} MiB above a tiny log's"

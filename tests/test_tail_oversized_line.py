"""A 10 MB line without a newline: capped, counted once as oversized, the lines after it are read,
and memory stays bounded (measured with tracemalloc while the tailer reads it)."""

from __future__ import annotations

import os
import tracemalloc

from tail_support import Harness, append, decode_block

from exporter.sources.log.file import READ_CHUNK

MAX_LINE = 1 << 20


def test_ten_megabyte_line_is_capped_with_bounded_memory(tmp_path, record_property):
    log = tmp_path / "sglang.log"
    log.write_bytes(b"")
    runaway = (b"x" * 1023 + b"\r") * (10 * 1024)  # 10 MiB, no newline (a stuck progress bar)
    tracemalloc.start()
    try:
        with Harness(log, max_line_bytes=MAX_LINE) as h:
            append(log, decode_block(5))
            h.wait_decode(5)
            tracemalloc.reset_peak()
            base = tracemalloc.get_traced_memory()[0]
            with open(log, "ab", buffering=0) as w:  # written in pieces, read as it grows
                for k in range(0, len(runaway), 1 << 18):
                    w.write(runaway[k:k + (1 << 18)])
                    if k % (1 << 21) == 0:
                        h.settle(1)
            h.wait(lambda: h.stats(log).bytes_read >= os.path.getsize(log), "the runaway line read")
            h.settle()
            peak = tracemalloc.get_traced_memory()[1] - base
            assert h.stats(log).oversized_lines == 1
            assert h.lines() == 5
            append(log, b" tail of the runaway line\n" + decode_block(7))
            h.wait_decode(12, "after the oversized line")
            assert h.stats(log).oversized_lines == 1  # counted once, not once per chunk
            assert h.metric("sglang_exporter_log_oversized_lines_total", path=str(log)) == 1
    finally:
        tracemalloc.stop()
    record_property("peak_bytes", peak)
    print(f"tracemalloc peak while reading a 10 MiB line: {peak / 2**20:.2f} MiB")
    assert peak < 2 * MAX_LINE + 2 * READ_CHUNK + (1 << 20), f"peak {peak} bytes"
    assert peak < len(runaway) / 2


def test_oversized_line_inside_one_chunk(tmp_path):
    log = tmp_path / "sglang.log"
    log.write_bytes(b"")
    with Harness(log, max_line_bytes=4096) as h:
        append(log, decode_block(3) + b"y" * 10000 + b"\n" + decode_block(4))  # whole line in one read
        h.wait_decode(7)
        assert h.stats(log).oversized_lines == 1

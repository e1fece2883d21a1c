"""100,000 lines written in one burst are all counted, once."""

from __future__ import annotations

from tail_support import DEADLINE, Harness, append, decode_block

N = 100_000


def test_hundred_thousand_lines_in_one_write(tmp_path):
    log = tmp_path / "sglang.log"
    log.write_bytes(b"")
    with Harness(log) as h:
        data = decode_block(N)
        append(log, data)  # one write of ~16 MB
        h.wait(lambda: h.lines() >= N, f"{N} lines", deadline=max(DEADLINE, 60))
        h.settle()
        assert h.lines() == N
        assert h.total_lines() == N
        assert h.stats(log).bytes_read == len(data)
        assert h.metric("sglang_exporter_log_behind_bytes", path=str(log)) == 0

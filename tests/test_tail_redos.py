"""ReDoS guard: megabyte-long crafted lines go through the parser in time linear in their length.

Each crafted line is timed at 64 KiB and at 1 MiB (16x longer) in the same test; the long one may
take at most 64x the short one (linear with a generous factor 4; quadratic would be 256x, and
seconds to minutes in absolute terms). Runs under 0.2 s pass outright, so CPU noise on a shared
machine cannot fail the test."""

from __future__ import annotations

import time

import pytest

from exporter.sources.log import prefix
from exporter.sources.log.parser import parse_line
from tail_support import DECODE_LINES

DECODE = DECODE_LINES[0].decode()
BODY = DECODE.partition("] ")[2]  # "Decode batch, #running-req: ..."


def _rep(unit: str, n: int) -> str:
    return unit * max(1, n // len(unit))


# name -> function of a target length giving a crafted line of about that length
CRAFTED = {
    "comma-space": lambda n: "[2026-09-13 16:05:58] Decode batch, " + _rep(", ", n),
    "running-req": lambda n: _rep("#running-req: ", n),
    "running-req-after-bracket": lambda n: "] " + _rep("#running-req: ", n),
    "open-brackets": lambda n: _rep("[", n),
    "open-brackets-then-title": lambda n: _rep("[", n) + "] " + BODY,
    "digits-prefix": lambda n: _rep("1", n) + "] " + BODY,
    "date-like-prefix": lambda n: _rep("2026-09-1", n) + "] " + BODY,
    "time-like-prefix": lambda n: _rep("1:1", n) + "] " + BODY,
    "rank-tags": lambda n: "[" + _rep("TP0 DP1 ", n) + "] " + BODY,
    "blanks-before-title": lambda n: _rep(" ", n) + BODY,
    "title-repeated": lambda n: _rep("Decode batch", n),
    "prefill-fields": lambda n: "] Prefill batch, " + _rep("#new-seq: 1, ", n),
    "swa-subfields": lambda n: "] Decode batch, #running-req: 1, #token: " + _rep("full=1, ", n),
    "mixed-unclosed": lambda n: "] Prefill batch(mixed #running-req: " + _rep("1", n),
    "server-args": lambda n: "] server_args=ServerArgs(" + _rep("decode_log_interval=", n),
    "req-time-stats": lambda n: "] Req Time Stats(" + _rep("queue_duration=1", n) + "ms",
    "req-time-stats-ints": lambda n: "] ReqTimeStats(" + _rep(" input_len=", n) + "): queue_duration=1ms",
    "capacity": lambda n: "] max_total_num_tokens=" + _rep("1, x=", n),
    "retraction": lambda n: "] KV cache pool is full. Retract requests. " + _rep("#retracted_reqs: 1, ", n),
    "ray-prefix": lambda n: _rep("(SGLangEngine pid=1) ", n) + "[2026-09-13 16:05:58] " + BODY,
}


def _best_time(line: str, repeat: int = 5) -> float:
    best = float("inf")
    for _ in range(repeat):
        prefix._ORIGIN_CACHE.clear()  # time the work, not the memo
        t0 = time.perf_counter()
        parse_line(line)
        best = min(best, time.perf_counter() - t0)
    return best


@pytest.mark.parametrize("name", sorted(CRAFTED))
def test_parse_time_is_linear(name):
    make = CRAFTED[name]
    short, long = make(1 << 16), make(1 << 20)
    assert len(long) >= 1 << 19
    t_short, t_long = _best_time(short), _best_time(long)  # best of 5: filters other processes' bursts
    parse_line(long)  # and it does not raise
    assert t_long < 0.2 or t_long <= 64 * max(t_short, 1e-5), (
        f"{name}: {t_short * 1e3:.2f} ms at {len(short)} chars, {t_long * 1e3:.2f} ms at {len(long)}")


def test_long_prefixes_are_not_memoised():
    """A 1 MiB prefix must not stay in the origin cache (4096 of them would hold gigabytes)."""
    prefix._ORIGIN_CACHE.clear()
    parse_line(_rep("x", 1 << 20) + "] " + BODY)
    assert all(len(k) <= 1024 for k in prefix._ORIGIN_CACHE)

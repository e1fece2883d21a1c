"""FpmStats: the sequence rule, pass modes, the rank cap and freshness, on decoded SGLang messages."""

from __future__ import annotations

import msgspec
from conftest import samples, value
from fpm_publisher import ForwardPassMetrics, encode, forward_pass
from prometheus_client import CollectorRegistry, generate_latest

from exporter.sources.fpm.collector import FpmCollector
from exporter.sources.fpm.decode import INVALID, UNDECODABLE, decode_frames, is_heartbeat
from exporter.sources.fpm.stats import MAX_SEQUENCE_GAP, FpmStats


def _msg(seq: int, metrics) -> tuple[int, object]:
    return decode_frames([b"", seq.to_bytes(8, "big"), encode(metrics)])


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _scrape(stats: FpmStats) -> dict:
    reg = CollectorRegistry(auto_describe=False)
    reg.register(FpmCollector(stats))
    return samples(generate_latest(reg).decode())


def test_decode_and_classify_sglang_messages():
    seq, m = _msg(41, forward_pass(2, decode=7, prefill=1))
    assert seq == 41 and not is_heartbeat(m) and m.dp_rank == 2
    assert m.scheduled_requests.num_decode_requests == 7 and m.scheduled_requests.sum_prefill_tokens == 128
    _, hb = _msg(42, ForwardPassMetrics(worker_id="w", dp_rank=2))  # SGLang's heartbeat
    assert is_heartbeat(hb)
    _, idle = _msg(43, forward_pass(0, wall_time=0.003))  # a pass with no request (DP-attention idle)
    assert not is_heartbeat(idle)
    for bad in (forward_pass(0, decode=1, wall_time=float("inf")), forward_pass(0, decode=1, wall_time=-1.0),
                forward_pass(0, decode=-1), forward_pass(0, queued_decode_kv_tokens=10**15), forward_pass(-2)):
        assert _msg(44, bad) == (44, INVALID), bad
    assert decode_frames([b"", b"\x00" * 8]) == (None, UNDECODABLE)
    assert decode_frames([b"", b"\x00" * 7 + b"\x05", b"\xc1"]) == (5, UNDECODABLE)
    # Integral floats and numeric strings are counts in lax mode (a fork's encoder); 1.5 requests is
    # an impossible value, a word where a count belongs is damage.
    _, lax = decode_frames([b"", bytes(8), msgspec.msgpack.encode(
        {"wall_time": 1, "scheduled_requests": {"num_decode_requests": 3.0, "sum_decode_kv_tokens": "9"}})])
    assert lax.scheduled_requests.num_decode_requests == 3 and lax.scheduled_requests.sum_decode_kv_tokens == 9
    half = msgspec.msgpack.encode({"scheduled_requests": {"num_decode_requests": 1.5}})
    word = msgspec.msgpack.encode({"scheduled_requests": {"num_decode_requests": "one"}})
    assert decode_frames([b"", bytes(8), half])[1] == INVALID
    assert decode_frames([b"", bytes(8), word])[1] == UNDECODABLE


def test_sequence_gaps_restarts_and_modes():
    clock = Clock()
    st = FpmStats(["ipc:///e.0"], timeout=5.0, monotonic=clock, clock=clock)
    st.apply(0, [_msg(100, forward_pass(0, decode=4)),          # first message: no loss before it
                 _msg(101, forward_pass(0, prefill=2)),
                 _msg(105, forward_pass(0, prefill=1, decode=3)),  # 102..104 lost
                 _msg(106, forward_pass(0, wall_time=0.002)),      # idle pass
                 _msg(107, ForwardPassMetrics(dp_rank=0))])        # heartbeat
    ep = st.endpoints[0]
    assert ep.results == {"ok": 4, "heartbeat": 1, "undecodable": 0, "invalid": 0, "lost": 3}
    assert st.ranks[0].passes == [1, 1, 1, 1]
    st.apply(0, [_msg(0, ForwardPassMetrics(dp_rank=0)), _msg(1, forward_pass(0, decode=1))])  # restart
    st.apply(0, [_msg(1, forward_pass(0, decode=1))])  # a repeated number is a restart too, never a loss
    st.apply(0, [_msg(1 + MAX_SEQUENCE_GAP + 1, forward_pass(0, decode=1))])  # too far to be a gap
    assert (ep.restarts, ep.results["lost"]) == (3, 3)
    assert ep.results["ok"] == 7


def test_rank_cap_and_freshness():
    clock = Clock()
    st = FpmStats(["ipc:///e.0"], timeout=5.0, max_ranks=2, monotonic=clock, clock=clock)
    st.apply(0, [_msg(i, forward_pass(i, decode=1, queued_prefill=i + 1)) for i in range(3)])
    assert sorted(st.ranks) == [0, 1] and st.endpoints[0].results["invalid"] == 1
    m = _scrape(st)
    assert value(m, "sglang_scheduler_forward_pass_queued_requests", stage="", dp_rank="1", phase="prefill") == 2
    assert value(m, "sglang_exporter_fpm_up", endpoint="ipc:///e.0") == 1
    clock.t += 5.5
    m = _scrape(st)
    assert value(m, "sglang_exporter_fpm_up", endpoint="ipc:///e.0") == 0
    assert value(m, "sglang_scheduler_forward_pass_queued_requests", stage="", dp_rank="1", phase="prefill") is None
    assert value(m, "sglang_scheduler_forward_passes_total", stage="", dp_rank="1", mode="decode") == 1  # counters stay
    st.apply(0, [_msg(3, ForwardPassMetrics(dp_rank=1))])  # a heartbeat makes rank 1 fresh again
    m = _scrape(st)
    assert value(m, "sglang_scheduler_forward_pass_queued_requests", stage="", dp_rank="1", phase="prefill") == 2
    assert value(m, "sglang_scheduler_forward_pass_queued_requests", stage="", dp_rank="0", phase="prefill") is None


def _real_stream(version: str) -> tuple[dict, float]:
    """A real SGLang server's stream (test bed scenario fpm-prefill, 16 requests; the frames as
    received) through the stats and the collector, and SGLang's own prefill_cache counter of the run."""
    import base64
    import json
    from conftest import ROOT
    folder = ROOT / "tests" / "real_series" / f"sglang-{version}-fpm-prefill"
    frames = [[base64.b64decode(f) for f in json.loads(x)["frames"]]
              for x in (folder / "fpm.jsonl").read_text().splitlines()]
    stats = FpmStats(["ipc:///run/sglang/fpm.0"])
    stats.apply(0, [decode_frames(f) for f in frames])
    sglang = samples((folder / "end.prom").read_text())
    cache = next(v for (name, labels), v in sglang.items()
                 if name == "sglang:realtime_tokens_total" and ("mode", "prefill_cache") in labels)
    return _scrape(stats), cache


def test_cached_tokens_by_release_equal_sglangs_prefill_cache():
    """Issue 34 item 4: 0.5.18 fills sum_prefill_kv_tokens after the pass with the whole KV (2,475 for
    171 cached: it read 14x too high); 0.5.22+ with the cached prefix at schedule time. Each equals
    SGLang's realtime_tokens_total{mode="prefill_cache"} of the same run."""
    for version in ("0.5.18", "0.5.23"):
        m, cache = _real_stream(version)
        assert cache > 0
        got = value(m, "sglang_scheduler_forward_pass_prefill_cached_tokens_total", stage="", dp_rank="0")
        assert got == cache, version


def test_cached_tokens_are_absent_until_a_pass_shows_the_release():
    stats = FpmStats(["ipc:///x"])
    # a pass with more KV than computed tokens fits both releases: held, no series
    stats.apply(0, [_msg(0, forward_pass(0, prefill=1, prefill_tokens=10, prefill_kv_tokens=50))])
    assert value(_scrape(stats), "sglang_scheduler_forward_pass_prefill_cached_tokens_total", stage="",
                 dp_rank="0") is None
    # then one with as many KV as computed tokens: the whole KV after the pass (0.5.18-0.5.21)
    stats.apply(0, [_msg(1, forward_pass(0, prefill=1, prefill_tokens=30, prefill_kv_tokens=30))])
    assert value(_scrape(stats), "sglang_scheduler_forward_pass_prefill_cached_tokens_total", stage="",
                 dp_rank="0") == 40


def test_retracted_tokens_are_the_rises_of_the_queued_decode_kv():
    """Issue 34 item 2: a request retracted goes back to the waiting queue with its output, counted
    under queued_requests' decode side with its seqlen; a rise of that sum from one pass to the next
    is the KV retracted in between (a fall, a re-admission, is not; a heartbeat's empty queue is not
    a pass). The first pass is the base: what waited before the exporter connected is not counted."""
    stats = FpmStats(["ipc:///x"])
    passes = [forward_pass(0, decode=4, queued_decode=1, queued_decode_kv_tokens=900),  # base
              forward_pass(0, decode=3, queued_decode=2, queued_decode_kv_tokens=2100),  # +1,200 retracted
              forward_pass(0, prefill=1, decode=2, queued_decode=1, queued_decode_kv_tokens=1200),  # re-admitted
              ForwardPassMetrics(dp_rank=0),  # heartbeat: queue of the struct's defaults
              forward_pass(0, decode=2, queued_decode=3, queued_decode_kv_tokens=3000),  # +1,800 (2 retracted)
              forward_pass(0, prefill=2, decode=1)]  # both re-admitted
    stats.apply(0, [_msg(i, p) for i, p in enumerate(passes)])
    m = _scrape(stats)
    assert value(m, "sglang_scheduler_forward_pass_retracted_tokens_total", stage="", dp_rank="0") == 3000
    assert value(m, "sglang_scheduler_forward_pass_queued_tokens", stage="", dp_rank="0", phase="decode") == 0

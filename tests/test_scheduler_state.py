"""Scheduler state (exporter/scheduler/state.py): the counting rule and each derivation, on real line shapes."""

from __future__ import annotations

from conftest import value
from scheduler_support import DECODE, PREFILL, RETRACT, feed, scrape

from exporter.scheduler.state import QUEUE_SAMPLE_MAX_GAP_SECONDS


def test_retraction_printed_by_every_tp_rank_counts_once():
    lines = [RETRACT.format(s=33, tp=tp, n=2) for tp in range(8)]
    m = scrape(feed(lines))
    assert value(m, "sglang_scheduler_retractions_total", dp_rank="0") == 1
    assert value(m, "sglang_scheduler_retracted_requests_total", dp_rank="0") == 2


def test_sidecar_seeing_only_ranks_8_to_15_counts_right():
    # Three events; ranks 8-15 each print all three, interleaved out of order as in corpus 007.
    lines = []
    for s in (33, 45, 50):
        lines += [RETRACT.format(s=s, tp=tp, n=1) for tp in (13, 9, 15, 8, 11, 10, 12, 14)]
    m = scrape(feed(lines))
    assert value(m, "sglang_scheduler_retractions_total", dp_rank="0") == 3


def test_replica_lagging_behind_does_not_lower_counters():
    # PP0 printed 3 decode lines, PP1 only 1 so far: the scheduler has run 3 x interval steps.
    lines = [DECODE.format(s=i, tags=" PP0", r=8, t=100, q=0) for i in range(3)]
    lines.append(DECODE.format(s=0, tags=" PP1", r=8, t=100, q=0))
    m = scrape(feed(lines))
    assert value(m, "sglang_scheduler_batches_total", dp_rank="0", phase="decode") == 120
    assert value(m, "sglang_scheduler_batch_size_count", dp_rank="0", phase="decode") == 3
    assert value(m, "sglang_scheduler_batch_size_bucket", dp_rank="0", phase="decode", le="8.0") == 3


def test_dp_ranks_are_separate_schedulers():
    lines = [DECODE.format(s=0, tags=" DP0 TP0", r=4, t=10, q=0), DECODE.format(s=0, tags=" DP1 TP1", r=6, t=10, q=0)]
    m = scrape(feed(lines))
    assert value(m, "sglang_scheduler_running_requests", dp_rank="0") == 4
    assert value(m, "sglang_scheduler_running_requests", dp_rank="1") == 6


def test_server_args_decode_log_interval_wins_over_setting():
    lines = ["[2026-09-13 16:05:00] server_args=ServerArgs(model_path='m', decode_log_interval=10, tp_size=1)",
             DECODE.format(s=0, tags="", r=5, t=10, q=0)]
    m = scrape(feed(lines, interval=40))
    assert value(m, "sglang_scheduler_batches_total", dp_rank="0", phase="decode") == 10
    assert value(m, "sglang_scheduler_decode_log_interval", dp_rank="0") == 10
    m = scrape(feed(lines[1:], interval=25))
    assert value(m, "sglang_scheduler_batches_total", dp_rank="0", phase="decode") == 25


def test_recompute_estimate_uses_latest_decode_line_mean_footprint():
    lines = [DECODE.format(s=0, tags=" TP0", r=50, t=60000, q=0),  # 1200 tokens per running request
             RETRACT.format(s=1, tp=0, n=3), RETRACT.format(s=1, tp=1, n=3)]
    m = scrape(feed(lines))
    assert value(m, "sglang_scheduler_recomputed_tokens_total", dp_rank="0", method="estimated") == 3600
    assert value(m, "sglang_scheduler_recomputed_tokens_total", dp_rank="0", method="new_tokens_gained") == 0


def test_recompute_exact_from_new_tokens_gained():
    line = ("[2026-09-13 16:06:07] KV cache pool is full. Retract requests. #retracted_reqs: 2, "
            "#new_tokens_gained: 646, #new_token_ratio: 0.0980 -> 0.3487")
    m = scrape(feed([DECODE.format(s=0, tags="", r=50, t=60000, q=0), line]))
    assert value(m, "sglang_scheduler_recomputed_tokens_total", dp_rank="0", method="new_tokens_gained") == 646
    assert value(m, "sglang_scheduler_recomputed_tokens_total", dp_rank="0", method="estimated") == 0
    assert value(m, "sglang_scheduler_retraction_freed_tokens_total", dp_rank="0") == 646
    assert value(m, "sglang_scheduler_new_token_ratio", dp_rank="0") == 0.3487


def test_admitted_requests_discount_the_continuing_chunk():
    cap = ("[2026-09-13 16:05:21] max_total_num_tokens=87552, chunked_prefill_size=2048, max_prefill_tokens=16384, "
           "max_running_requests=2048, context_len=32768, available_gpu_mem=1.91 GB")
    lines = [cap,
             PREFILL.format(s=0, tags="", n=3, t=2048, q=10),  # fills the chunk: its last request continues
             PREFILL.format(s=1, tags="", n=2, t=2048, q=9),   # 1 continuing + 1 new, again chunked
             PREFILL.format(s=2, tags="", n=1, t=700, q=9)]    # the continuing one finishes
    m = scrape(feed(lines))
    assert value(m, "sglang_scheduler_admitted_requests_total", dp_rank="0") == 4
    assert value(m, "sglang_scheduler_batches_total", dp_rank="0", phase="prefill") == 3


def test_queue_integral_uses_log_time_caps_gaps_and_ignores_backwards_steps():
    lines = [DECODE.format(s=0, tags="", r=1, t=1, q=4),
             DECODE.format(s=2, tags="", r=1, t=1, q=6),    # 4 x 2 s = 8
             DECODE.format(s=1, tags="", r=1, t=1, q=6),    # backwards: nothing
             DECODE.format(s=5, tags="", r=1, t=1, q=0)]    # 6 x 4 s = 24
    m = scrape(feed(lines))
    assert value(m, "sglang_scheduler_queue_request_seconds_total", dp_rank="0") == 32
    gap = ["[2026-09-13 10:00:00] Decode batch, #running-req: 1, #token: 1, token usage: 0.1, "
           "gen throughput (token/s): 1.0, #queue-req: 3",
           "[2026-09-13 11:00:00] Decode batch, #running-req: 1, #token: 1, token usage: 0.1, "
           "gen throughput (token/s): 1.0, #queue-req: 0"]
    m = scrape(feed(gap))
    assert value(m, "sglang_scheduler_queue_request_seconds_total", dp_rank="0") == 3 * QUEUE_SAMPLE_MAX_GAP_SECONDS


def test_queue_integral_wraps_midnight_for_time_only_prefix():
    lines = ["[23:59:59 TP0] Prefill batch. #new-seq: 1, #new-token: 5, #cached-token: 0, cache hit rate: 0.00%, "
             "token usage: 0.00, #running-req: 0, #queue-req: 5",
             "[00:00:01 TP0] Prefill batch. #new-seq: 1, #new-token: 5, #cached-token: 0, cache hit rate: 0.00%, "
             "token usage: 0.00, #running-req: 0, #queue-req: 4"]
    m = scrape(feed(lines))
    assert value(m, "sglang_scheduler_queue_request_seconds_total", dp_rank="0") == 10


def test_queue_wait_histogram_from_req_time_stats():
    lines = ["[2026-07-20 10:00:00 TP0] ReqTimeStats(rid=a, input_len=1, output_len=1, type=unified): "
             f"queue_duration={ms}ms, forward_duration=1.00ms, entry_time=1.0" for ms in ("3.00", "700.00", "-5.00")]
    m = scrape(feed(lines))
    assert value(m, "sglang_scheduler_queue_wait_seconds_count", dp_rank="0") == 2  # negative skipped
    assert value(m, "sglang_scheduler_queue_wait_seconds_bucket", dp_rank="0", le="0.005") == 1
    assert value(m, "sglang_scheduler_queue_wait_seconds_bucket", dp_rank="0", le="1.0") == 2


def test_capacity_of_dp0_applies_to_every_dp_rank():
    cap = "[2025-06-09 22:16:48 DP0 TP0] max_total_num_tokens=1005629, max_prefill_tokens=16384, max_running_requests=3929, context_len=131072"
    m = scrape(feed([cap, DECODE.format(s=0, tags=" DP3 TP3", r=1, t=1, q=0)]))
    assert value(m, "sglang_scheduler_max_total_tokens", dp_rank="3") == 1005629
    assert value(m, "sglang_scheduler_max_running_requests", dp_rank="3") == 3929

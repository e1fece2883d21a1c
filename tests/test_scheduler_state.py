"""Scheduler state (exporter/scheduler/state.py): the counting rule and each derivation, on real line shapes."""

from __future__ import annotations

from conftest import value
from scheduler_support import DECODE, PREFILL, RETRACT, feed, scrape

from exporter.scheduler.state import BATCH_SIZE_BUCKETS, QUEUE_SAMPLE_MAX_GAP_SECONDS


def test_retraction_printed_by_every_tp_rank_counts_once():
    lines = [RETRACT.format(s=33, tp=tp, n=2) for tp in range(8)]
    m = scrape(feed(lines))
    assert value(m, "sglang_scheduler_retractions_total", stage="", dp_rank="0") == 1
    assert value(m, "sglang_scheduler_retracted_requests_total", stage="", dp_rank="0") == 2


def test_sidecar_seeing_only_ranks_8_to_15_counts_right():
    # Three events; ranks 8-15 each print all three, interleaved out of order as in corpus 007.
    lines = []
    for s in (33, 45, 50):
        lines += [RETRACT.format(s=s, tp=tp, n=1) for tp in (13, 9, 15, 8, 11, 10, 12, 14)]
    m = scrape(feed(lines))
    assert value(m, "sglang_scheduler_retractions_total", stage="", dp_rank="0") == 3


def test_replica_lagging_behind_does_not_lower_counters():
    # PP0 printed 3 decode lines, PP1 only 1 so far: the scheduler has run 3 x interval steps.
    lines = [DECODE.format(s=i, tags=" PP0", r=8, t=100, q=0) for i in range(3)]
    lines.append(DECODE.format(s=0, tags=" PP1", r=8, t=100, q=0))
    m = scrape(feed(lines))
    assert value(m, "sglang_scheduler_batches_total", stage="", dp_rank="0", phase="decode") == 120
    assert value(m, "sglang_scheduler_batch_size_count", stage="", dp_rank="0", phase="decode") == 3
    assert value(m, "sglang_scheduler_batch_size_bucket", stage="", dp_rank="0", phase="decode", le="8.0") == 3


def test_dp_ranks_are_separate_schedulers():
    lines = [DECODE.format(s=0, tags=" DP0 TP0", r=4, t=10, q=0), DECODE.format(s=0, tags=" DP1 TP1", r=6, t=10, q=0)]
    m = scrape(feed(lines))
    assert value(m, "sglang_scheduler_running_requests", stage="", dp_rank="0") == 4
    assert value(m, "sglang_scheduler_running_requests", stage="", dp_rank="1") == 6


def test_server_args_decode_log_interval_wins_over_setting():
    lines = ["[2026-09-13 16:05:00] server_args=ServerArgs(model_path='m', decode_log_interval=10, tp_size=1)",
             DECODE.format(s=0, tags="", r=5, t=10, q=0)]
    m = scrape(feed(lines, interval=40))
    assert value(m, "sglang_scheduler_batches_total", stage="", dp_rank="0", phase="decode") == 10
    assert value(m, "sglang_scheduler_decode_log_interval", stage="", dp_rank="0", source="server_args") == 10
    m = scrape(feed(lines[1:], interval=25))
    assert value(m, "sglang_scheduler_batches_total", stage="", dp_rank="0", phase="decode") == 25
    assert value(m, "sglang_scheduler_decode_log_interval", stage="", dp_rank="0", source="setting") == 25


def test_an_assumed_interval_is_labelled_default_and_said_once(tmp_path, caplog):
    """No server_args and no setting: the interval is SGLang's default, assumed, and says so."""
    import logging

    from exporter.cli import main

    log = tmp_path / "s.log"
    log.write_text("\n".join(DECODE.format(s=i, tags="", r=5, t=10, q=0) for i in range(3)) + "\n")
    import contextlib
    import io

    out = io.StringIO()
    with caplog.at_level(logging.WARNING), contextlib.redirect_stdout(out):
        assert main(["--log.path", str(log), "--one-shot"]) == 0
    assert value(out.getvalue(), "sglang_scheduler_decode_log_interval", stage="", dp_rank="0", source="default") == 40
    said = [r for r in caplog.records if "decode_log_interval" in r.getMessage()]
    assert len(said) == 1 and said[0].levelno == logging.WARNING
    out = io.StringIO()
    caplog.clear()
    with caplog.at_level(logging.WARNING), contextlib.redirect_stdout(out):
        assert main(["--log.path", str(log), "--one-shot", "--sglang.decode-log-interval", "40"]) == 0
    assert value(out.getvalue(), "sglang_scheduler_decode_log_interval", stage="", dp_rank="0", source="setting") == 40
    assert not [r for r in caplog.records if "decode_log_interval" in r.getMessage()]


def test_recompute_estimate_uses_latest_decode_line_mean_footprint():
    lines = [DECODE.format(s=0, tags=" TP0", r=50, t=60000, q=0),  # 1200 tokens per running request
             RETRACT.format(s=1, tp=0, n=3), RETRACT.format(s=1, tp=1, n=3)]
    m = scrape(feed(lines))
    assert value(m, "sglang_scheduler_recomputed_tokens_total", stage="", dp_rank="0", method="estimated") == 3600
    assert value(m, "sglang_scheduler_recomputed_tokens_total", stage="", dp_rank="0", method="new_tokens_gained") == 0


def test_recompute_exact_from_new_tokens_gained():
    line = ("[2026-09-13 16:06:07] KV cache pool is full. Retract requests. #retracted_reqs: 2, "
            "#new_tokens_gained: 646, #new_token_ratio: 0.0980 -> 0.3487")
    m = scrape(feed([DECODE.format(s=0, tags="", r=50, t=60000, q=0), line]))
    assert value(m, "sglang_scheduler_recomputed_tokens_total", stage="", dp_rank="0", method="new_tokens_gained") == 646
    assert value(m, "sglang_scheduler_recomputed_tokens_total", stage="", dp_rank="0", method="estimated") == 0
    assert value(m, "sglang_scheduler_retraction_freed_tokens_total", stage="", dp_rank="0") == 646
    assert value(m, "sglang_scheduler_new_token_ratio", stage="", dp_rank="0") == 0.3487


def test_admitted_requests_discount_the_continuing_chunk():
    cap = ("[2026-09-13 16:05:21] max_total_num_tokens=87552, chunked_prefill_size=2048, max_prefill_tokens=16384, "
           "max_running_requests=2048, context_len=32768, available_gpu_mem=1.91 GB")
    lines = [cap,
             PREFILL.format(s=0, tags="", n=3, t=2048, q=10),  # fills the chunk: its last request continues
             PREFILL.format(s=1, tags="", n=2, t=2048, q=9),   # 1 continuing + 1 new, again chunked
             PREFILL.format(s=2, tags="", n=1, t=700, q=9)]    # the continuing one finishes
    m = scrape(feed(lines))
    assert value(m, "sglang_scheduler_admitted_requests_total", stage="", dp_rank="0") == 4
    assert value(m, "sglang_scheduler_batches_total", stage="", dp_rank="0", phase="prefill") == 3


def test_queue_integral_uses_log_time_caps_gaps_and_ignores_backwards_steps():
    lines = [DECODE.format(s=0, tags="", r=1, t=1, q=4),
             DECODE.format(s=2, tags="", r=1, t=1, q=6),    # 4 x 2 s = 8
             DECODE.format(s=1, tags="", r=1, t=1, q=6),    # backwards: nothing
             DECODE.format(s=5, tags="", r=1, t=1, q=0)]    # 6 x 4 s = 24
    m = scrape(feed(lines))
    assert value(m, "sglang_scheduler_queue_request_seconds_total", stage="", dp_rank="0") == 32
    gap = ["[2026-09-13 10:00:00] Decode batch, #running-req: 1, #token: 1, token usage: 0.1, "
           "gen throughput (token/s): 1.0, #queue-req: 3",
           "[2026-09-13 11:00:00] Decode batch, #running-req: 1, #token: 1, token usage: 0.1, "
           "gen throughput (token/s): 1.0, #queue-req: 0"]
    m = scrape(feed(gap))
    assert value(m, "sglang_scheduler_queue_request_seconds_total", stage="", dp_rank="0") == 3 * QUEUE_SAMPLE_MAX_GAP_SECONDS


def test_queue_integral_wraps_midnight_for_time_only_prefix():
    lines = ["[23:59:59 TP0] Prefill batch. #new-seq: 1, #new-token: 5, #cached-token: 0, cache hit rate: 0.00%, "
             "token usage: 0.00, #running-req: 0, #queue-req: 5",
             "[00:00:01 TP0] Prefill batch. #new-seq: 1, #new-token: 5, #cached-token: 0, cache hit rate: 0.00%, "
             "token usage: 0.00, #running-req: 0, #queue-req: 4"]
    m = scrape(feed(lines))
    assert value(m, "sglang_scheduler_queue_request_seconds_total", stage="", dp_rank="0") == 10


def test_queue_wait_histogram_from_req_time_stats():
    lines = ["[2026-07-20 10:00:00 TP0] ReqTimeStats(rid=a, input_len=1, output_len=1, type=unified): "
             f"queue_duration={ms}ms, forward_duration=1.00ms, entry_time=1.0" for ms in ("3.00", "700.00", "-5.00")]
    m = scrape(feed(lines))
    assert value(m, "sglang_scheduler_queue_wait_seconds_count", stage="", dp_rank="0") == 2  # negative skipped
    assert value(m, "sglang_scheduler_queue_wait_seconds_bucket", stage="", dp_rank="0", le="0.005") == 1
    assert value(m, "sglang_scheduler_queue_wait_seconds_bucket", stage="", dp_rank="0", le="1.0") == 2


def test_capacity_of_dp0_applies_to_every_dp_rank():
    cap = "[2025-06-09 22:16:48 DP0 TP0] max_total_num_tokens=1005629, max_prefill_tokens=16384, max_running_requests=3929, context_len=131072"
    m = scrape(feed([cap, DECODE.format(s=0, tags=" DP3 TP3", r=1, t=1, q=0)]))
    assert value(m, "sglang_scheduler_max_total_tokens", stage="", dp_rank="3") == 1005629
    assert value(m, "sglang_scheduler_max_running_requests", stage="", dp_rank="3") == 3929


# --- issue 12 item 2: capacity line with chunked prefill off -------------------------------------

def test_capacity_gauges_with_chunked_prefill_off():
    m = scrape(feed(["[2025-10-02 08:00:00] max_total_num_tokens=40960, chunked_prefill_size=-1, "
                     "max_prefill_tokens=16384, max_running_requests=256, context_len=32768, "
                     "available_gpu_mem=60.10 GB"]))
    assert value(m, "sglang_scheduler_max_total_tokens", stage="", dp_rank="0") == 40960
    assert value(m, "sglang_scheduler_max_running_requests", stage="", dp_rank="0") == 256
    assert value(m, "sglang_scheduler_context_length", stage="", dp_rank="0") == 32768
    assert value(m, "sglang_scheduler_chunked_prefill_size", stage="", dp_rank="0") is None


def test_a_scheduler_known_only_from_a_start_up_line_exposes_every_bound_at_0():
    m = scrape(feed(["[2025-10-02 08:00:00] max_total_num_tokens=40960, context_len=32768"]))
    buckets = {dict(labels)["le"]: v for (name, labels), v in m.items()
               if name == "sglang_scheduler_batch_size_bucket" and ("phase", "decode") in labels}
    assert len(buckets) == len(BATCH_SIZE_BUCKETS) + 1 and set(buckets.values()) == {0}
    assert buckets["1.0"] == 0 and buckets["+Inf"] == 0


# --- item 3: KV Cache is allocated ------------------------------------------------------------------

KV = "[2026-07-10 11:00:00{tags}] KV Cache is allocated. dtype: torch.bfloat16, #tokens: {n}, K size: 7.63 GB, V size: 7.63 GB"


def test_kv_allocation_line_is_the_capacity_when_the_capacity_line_is_absent():
    m = scrape(feed([KV.format(tags=" TP0", n=500000), KV.format(tags=" TP1", n=500000),
                     DECODE.format(s=0, tags=" TP0", r=3, t=10, q=0)]))
    assert value(m, "sglang_scheduler_max_total_tokens", stage="", dp_rank="0") == 500000
    assert value(m, "sglang_scheduler_max_running_requests", stage="", dp_rank="0") is None  # the KV line has no ceiling
    cap = "[2026-07-10 11:00:02] max_total_num_tokens=499000, max_prefill_tokens=16384, context_len=8192"
    m = scrape(feed([KV.format(tags="", n=500000), cap]))
    assert value(m, "sglang_scheduler_max_total_tokens", stage="", dp_rank="0") == 499000  # the capacity line wins


def test_kv_allocation_of_a_hybrid_pool_takes_the_latest_the_full_pool():
    # SGLang's SWAKVPool allocates the SWA pool first, then the full pool (max_total_num_tokens).
    m = scrape(feed([KV.format(tags=" DP1 TP1", n=400000), KV.format(tags=" DP1 TP1", n=500000),
                     DECODE.format(s=0, tags=" DP0 TP0", r=1, t=1, q=0)]))
    assert value(m, "sglang_scheduler_max_total_tokens", stage="", dp_rank="1") == 500000
    assert value(m, "sglang_scheduler_max_total_tokens", stage="", dp_rank="0") == 500000  # any scheduler's, when none own


# --- item 5: derived products stay in range --------------------------------------------------------

def test_extreme_fields_do_not_poison_the_decode_tokens_counter():
    extreme = ("[2026-09-13 16:06:00] Decode batch, #running-req: 999999999999999, #token: 1, token usage: 0.5, "
               "accept len: 99999999999999, gen throughput (token/s): 1.0, #queue-req: 0")
    p = feed([DECODE.format(s=0, tags="", r=10, t=100, q=0), extreme, DECODE.format(s=1, tags="", r=10, t=100, q=0)])
    m = scrape(p)
    assert value(m, "sglang_scheduler_decode_tokens_total", stage="", dp_rank="0") == 2 * 10 * 40  # still counting
    assert value(m, "sglang_scheduler_batch_size_count", stage="", dp_rank="0", phase="decode") == 2
    assert p.stats.rejected["range"] == 1 and p.stats.lines[("decode", "malformed")] == 1


def test_queue_and_recompute_products_stay_in_range():
    huge_queue = DECODE.format(s=0, tags="", r=1, t=1, q=10**14)  # x 60 s would leave the range
    p = feed([huge_queue, DECODE.format(s=1, tags="", r=1, t=1, q=5), DECODE.format(s=2, tags="", r=1, t=1, q=0)])
    assert value(scrape(p), "sglang_scheduler_queue_request_seconds_total", stage="", dp_rank="0") == 5
    assert p.stats.rejected["range"] == 1
    fat = ("[2026-09-13 16:06:00] Decode batch, #running-req: 1, #token: 999999999999999, token usage: 0.5, "
           "#queue-req: 0")
    retract = "[2025-03-07 21:49:01 TP0] Decode out of memory happened. #retracted_reqs: {n}, #new_token_ratio: 0.1 -> 0.2"
    p = feed([fat, retract.format(n=1), retract.format(n=2)])
    m = scrape(p)
    assert value(m, "sglang_scheduler_recomputed_tokens_total", stage="", dp_rank="0", method="estimated") == 999999999999999
    assert value(m, "sglang_scheduler_retractions_total", stage="", dp_rank="0") == 1
    assert p.stats.rejected["range"] == 1


# --- issue 16 item 4: garbage rank tags never lock out real ranks ----------------------------------

SERVER_ARGS = "[2026-09-13 16:05:00] server_args=ServerArgs(model_path='m', tp_size={tp}, dp_size={dp}, pp_size=1)"


def test_ranks_beyond_dp_size_are_refused_and_real_ranks_keep_their_slots():
    garbage = [DECODE.format(s=0, tags=f" DP{dp} TP0", r=1, t=1, q=0) for dp in range(8, 8 + 300)]
    real = [DECODE.format(s=1, tags=f" DP{dp} TP{dp}", r=dp + 1, t=1, q=0) for dp in range(8)]
    p = feed([SERVER_ARGS.format(tp=8, dp=8), *garbage, *real])
    m = scrape(p)
    assert sorted(p.store.states.schedulers, key=lambda k: int(k[1])) == [("", str(dp)) for dp in range(8)]
    assert all(value(m, "sglang_scheduler_running_requests", stage="", dp_rank=str(dp)) == dp + 1 for dp in range(8))
    assert p.stats.rejected["rank"] == 300 and p.stats.lines[("decode", "malformed")] == 300


def test_without_server_args_no_garbage_can_take_a_real_ranks_slot():
    garbage = [DECODE.format(s=0, tags=f" DP{dp} TP0", r=1, t=1, q=0) for dp in range(1000, 1400)]
    p = feed([*garbage, DECODE.format(s=1, tags=" DP7 TP0", r=5, t=1, q=0)])
    assert list(p.store.states.schedulers) == [("", "7")]  # only ranks below 256 can exist: 256 slots for 256 ranks
    assert p.stats.rejected["rank"] == 400


def test_router_managed_dp_server_keeps_its_rank_beside_dp_size_1():
    # SGLang's router launches each DP server with dp_size=1 and SGLANG_DP_RANK=3: every line says DP3.
    cap = "[2026-09-13 16:05:02 DP3] max_total_num_tokens=1000, max_prefill_tokens=100, context_len=100"
    p = feed([SERVER_ARGS.format(tp=1, dp=1), cap, DECODE.format(s=1, tags=" DP3", r=2, t=1, q=0),
              DECODE.format(s=2, tags=" DP9", r=2, t=1, q=0)])
    assert sorted(p.store.states.schedulers) == [("", "3")] and p.stats.rejected["rank"] == 1


def test_replica_tags_beyond_their_size_are_refused():
    lines = [SERVER_ARGS.format(tp=2, dp=1), DECODE.format(s=0, tags=" TP77", r=1, t=1, q=0),
             DECODE.format(s=1, tags=" TP1", r=1, t=1, q=0)]
    p = feed(lines)
    assert list(p.store.states.schedulers[("", "0")].replicas) == ["TP1"] and p.stats.rejected["rank"] == 1


def test_several_servers_in_one_glob_bound_by_the_largest_dp_size():
    p = feed([SERVER_ARGS.format(tp=1, dp=4), SERVER_ARGS.format(tp=1, dp=1),
              DECODE.format(s=0, tags=" DP3", r=1, t=1, q=0)])
    assert list(p.store.states.schedulers) == [("", "3")]


# -- issue 24: the live figures agree with the report ------------------------------------------------

def test_kv_tokens_after_a_prefill_line_are_not_the_previous_decode_lines():
    # Prefill lines print no #token: the gauge of the latest stats line is absent after one, not the
    # Decode line's 80000 beside the Prefill line's usage; the per-request footprint is counted on the
    # Decode lines only (sum of #token / sum of #running-req), as the report computes it.
    lines = [DECODE.format(s=1, tags="", r=40, t=80000, q=0), DECODE.format(s=2, tags="", r=10, t=10000, q=0),
             PREFILL.format(s=3, tags="", n=1, t=100, q=0)]
    m = scrape(feed(lines))
    assert value(m, "sglang_scheduler_kv_used_tokens", stage="", dp_rank="0") is None
    assert value(m, "sglang_scheduler_running_requests", stage="", dp_rank="0") == 1
    assert value(m, "sglang_scheduler_decode_kv_tokens_total", stage="", dp_rank="0") == 90000
    assert value(m, "sglang_scheduler_decode_kv_requests_total", stage="", dp_rank="0") == 50
    m = scrape(feed(lines[:2]))
    assert value(m, "sglang_scheduler_kv_used_tokens", stage="", dp_rank="0") == 10000


def test_a_start_up_line_ends_the_queue_integral_of_the_run_before_it():
    # The demo's loop seam, or a restarted server appending to its log: the queue of 29 left by the
    # last line before the start-up line is not held for the 30 s until the next run's first line.
    cap = ("[2026-09-13 16:06:20] max_total_num_tokens=87552, chunked_prefill_size=2048, max_prefill_tokens=16384, "
           "max_running_requests=2048, context_len=32768, available_gpu_mem=1.91 GB")
    lines = [DECODE.format(s=10, tags="", r=8, t=100, q=29), DECODE.format(s=11, tags="", r=8, t=100, q=29),
             cap, PREFILL.format(s=50, tags="", n=1, t=100, q=0)]
    m = scrape(feed(lines))
    assert value(m, "sglang_scheduler_queue_request_seconds_total", stage="", dp_rank="0") == 29
    without = scrape(feed(lines[:2] + lines[3:]))
    assert value(without, "sglang_scheduler_queue_request_seconds_total", stage="", dp_rank="0") == 29 + 29 * 39

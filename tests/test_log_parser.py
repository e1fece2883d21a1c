"""Table-driven parser tests: real lines of each era and prefix style.

Lines marked "corpus NNN" are copied from tests/corpus/NNN-*.log; lines marked "notes" are built
from SGLang's format strings as docs/log-format.md gives them, with synthetic values.
"""

from __future__ import annotations

import pytest

from exporter.events import (
    Capacity,
    DecodeBatch,
    KvAllocation,
    PrefillBatch,
    ReqTimeStats,
    RetractAbort,
    Retraction,
    ServerArgs,
)
from exporter.sources.log.parser import Malformed, parse_line, parse_origin
from exporter.sources.log.prefix import line_time
from exporter.sources.log.serverargs import split_server_args

# (id, line, expected type, expected attributes; "origin." keys check the Origin)
CASES = [
    # --- Prefill lines of every era -------------------------------------------------------------
    ("e24a-new-fill-batch", "new fill batch. #seq: 1. #cached_token: 2510. #new_token: 18. "
     "tree_cache_hit_rate: 62.18%. fsm_cache_hit_rate: 33.33%. fsm_cache_avg_init_time: 15.73s. "
     "#remaining_req: 0. #running_req: 0",  # corpus 021
     PrefillBatch, {"new_seq": 1, "cached_token": 2510, "new_token": 18, "queue_req": 0, "running_req": 0,
                    "origin.dp_rank": "0", "origin.log_time": None}),
    ("e24a-new-fill-trailing-period", "new fill batch. #seq: 1. #cached_token: 0. #new_token: 512. "
     "#remaining_req: 0. #running_req: 3. tree_cache_hit_rate: 12.34%.",  # notes E24a
     PrefillBatch, {"new_seq": 1, "new_token": 512, "running_req": 3}),
    ("v0117-prefil-typo-gpu-id", "[gpu_id=0] Prefil batch. #new-seq: 1, #new-token: 512, #cached-token: 0, "
     "cache hit rate: 12.34%, #running-req: 3, #queue-req: 0",  # notes 2024-06-07
     PrefillBatch, {"new_seq": 1, "new_token": 512, "running_req": 3, "queue_req": 0, "origin.dp_rank": "0"}),
    ("e24b-gpu-tag-dp", "[gpu=2] Prefill batch. #new-seq: 3, #new-token: 100, #cached-token: 7, "
     "cache hit rate: 1.00%, #running-req: 3, #queue-req: 5",  # notes: [gpu=N] from 2024-07-28
     PrefillBatch, {"new_seq": 3, "cached_token": 7, "origin.dp_rank": "2"}),
    ("mixed-chunk-title", "[12:00:00 TP0] Prefill batch(mixed #running-req: 7). #new-seq: 2, #new-token: 300, "
     "#cached-token: 0, cache hit rate: 0.00%, #queue-req: 4",  # notes 2024-08-16
     PrefillBatch, {"new_seq": 2, "new_token": 300, "running_req": 7, "queue_req": 4,
                    "origin.replica": "TP0", "origin.time_of_day_only": True}),
    ("l24-time-only-tp0", "[16:43:30 TP0] Prefill batch. #new-seq: 6, #new-token: 8192, #cached-token: 2753, "
     "cache hit rate: 14.16%, token usage: 0.18, #running-req: 4, #queue-req: 34",  # corpus 037
     PrefillBatch, {"new_seq": 6, "new_token": 8192, "cached_token": 2753, "running_req": 4, "queue_req": 34,
                    "origin.log_time": 16 * 3600 + 43 * 60 + 30.0, "origin.time_of_day_only": True}),
    ("l24-cache-hit-percent", "[2024-11-29 10:28:29 TP0] Prefill batch. #new-seq: 2, #new-token: 2048, "
     "#cached-token: 888, cache hit rate: 0.00%, token usage: 0.11, #running-req: 69, #queue-req: 130",  # corpus 020
     PrefillBatch, {"new_seq": 2, "new_token": 2048, "cached_token": 888, "running_req": 69, "queue_req": 130,
                    "origin.log_time": 1732876109.0}),
    ("2025-period-trailing-comma", "[2025-10-22 10:27:56 TP0] Prefill batch. #new-seq: 1, #new-token: 28, "
     "#cached-token: 0, token usage: 0.00, #running-req: 0, #queue-req: 0, ",  # corpus 016
     PrefillBatch, {"new_seq": 1, "new_token": 28, "queue_req": 0}),
    ("m25-token-in-prefill", "[2025-07-05 10:00:00] Prefill batch. #new-seq: 1, #new-token: 512, "
     "#cached-token: 0, #token: 2048, token usage: 0.02, #running-req: 3, #queue-req: 0",  # notes M25
     PrefillBatch, {"new_seq": 1, "origin.replica": ""}),
    ("swa-2025-full-swa-form", "[2025-07-01 10:00:00 TP0] Prefill batch. #new-seq: 1, #new-token: 64, "
     "#cached-token: 0, #token: full=100, swa=50, token usage: full=0.42, swa=0.97, #running-req: 1, "
     "#queue-req: 0",  # notes 2025-06-27 SWA form
     PrefillBatch, {"kv.pools": {"full": 0.42, "swa": 0.97}, "kv.used_tokens": 100, "kv.max_device_ratio": 0.97}),
    ("pd-prefill-2025-unbootstrapped", "[2025-06-01 10:00:00 TP0] Prefill batch. #new-seq: 1, #new-token: 9, "
     "#cached-token: 0, token usage: 0.01, #running-req: 0, #unbootstrapped-req: 2, #queue-req: 1, "
     "#transferring-req: 3, time: 0.52 ",  # notes 2025-04-25/06-03
     PrefillBatch, {"pd_queues": {"bootstrap": 2, "inflight": 3}, "queue_req": 1}),
    ("pd-prefill-prealloc-inflight", "[2026-02-19 16:32:49 TP0] Prefill batch, #new-seq: 1, #new-token: 1, "
     "#cached-token: 0, token usage: 0.00, #running-req: 0, #queue-req: 0, #prealloc-req: 1, #inflight-req: 0, "
     "input throughput (token/s): 1.73, ",  # corpus 010
     PrefillBatch, {"pd_queues": {"bootstrap": 1, "inflight": 0}, "input_throughput": 1.73}),
    ("iter-tag", "[2025-10-23 10:00:00 TP0] Prefill batch [1234], #new-seq: 1, #new-token: 5, "
     "#cached-token: 0, token usage: 0.00, #running-req: 0, #queue-req: 0, ",  # notes 2025-10-23
     PrefillBatch, {"new_token": 5}),
    ("now-full-template", "[2026-07-21 10:00:00 DP3 TP3 EP3] Prefill batch, #new-seq: 1, #new-token: 512, "
     "#cached-token: 0, token usage: 0.02, #running-req: 3, #queue-req: 0, #pending-token: 0, "
     "#bootstrap-req: 4, #inflight-req: 5, #optimistic-req: 1, cuda graph: False, "
     "input throughput (token/s): 8123.45",  # notes NOW
     PrefillBatch, {"origin.dp_rank": "3", "origin.replica": "TP3 EP3", "pending_token": 0,
                    "pd_queues": {"bootstrap": 4, "inflight": 5, "optimistic": 1}, "graph": False,
                    "input_throughput": 8123.45}),
    ("pending-token-no-tag", "[2026-09-13 16:05:59] Prefill batch, #new-seq: 1, #new-token: 351, "
     "#cached-token: 36, token usage: 0.81, #running-req: 67, #queue-req: 1, #pending-token: 387, "
     "cuda graph: True, input throughput (token/s): 153.68",  # corpus 008
     PrefillBatch, {"new_token": 351, "cached_token": 36, "pending_token": 387, "graph": True,
                    "origin.dp_rank": "0", "origin.replica": ""}),
    ("mamba-npu-graph", "[2026-07-04 04:31:24 TP0] Prefill batch, #new-seq: 12, #new-token: 43008, "
     "#cached-token: 0, full token usage: 0.14, mamba usage: 0.20, #running-req: 1, #queue-req: 97, "
     "#pending-token: 109585, npu graph: False, input throughput (token/s): 15734.14",  # corpus 019
     PrefillBatch, {"kv.pools": {"full": 0.14, "mamba": 0.20}, "kv.max_device_ratio": 0.20, "graph": False}),
    ("mfu-and-occupancy-suffix", "[2026-06-01 10:00:00 TP0] Prefill batch, #new-seq: 2, #new-token: 10, "
     "#cached-token: 0, token usage: 0.10, #running-req: 0, #queue-req: 0, #pending-token: 0, "
     "musa graph: True, input throughput (token/s): 1.00, est. prefill TFLOPS/s (per GPU): 3.21, "
     "fwd occupancy: 55.00%",  # notes 2026-03-30 / 2026-05-01
     PrefillBatch, {"new_seq": 2, "graph": True}),
    # --- Decode lines of every era --------------------------------------------------------------
    ("e24a-untitled-decode", "#running-req: 4, #token: 2048, token usage: 0.02, #queue-req: 0",  # notes E24a
     DecodeBatch, {"running_req": 4, "kv.used_tokens": 2048, "queue_req": 0}),
    ("e24-gpu-id-untitled", "[gpu_id=1] #running-req: 4, #token: 2048, token usage: 0.02, "
     "gen throughput (token/s): 512.00, #queue-req: 0",  # notes 2024-05-27
     DecodeBatch, {"running_req": 4, "gen_throughput": 512.0, "origin.dp_rank": "1"}),
    ("no-prefix-decode-2024", "Decode batch. #running-req: 1010, #token: 55006, token usage: 0.93, "
     "gen throughput (token/s): 1397.13, #queue-req: 12279",  # corpus 005
     DecodeBatch, {"running_req": 1010, "queue_req": 12279, "kv.pools": {"kv": 0.93}}),
    ("largest-len-trailing", "[2025-03-14 02:16:14 TP0] Decode batch. #running-req: 509, #token: 180776, "
     "token usage: 0.43, gen throughput (token/s): 7897.87, largest-len: 0, #queue-req: 0, ",  # corpus 002
     DecodeBatch, {"running_req": 509, "queue_req": 0}),
    ("dp-tp-accept-len", "[2025-05-31 18:31:21 DP6 TP6] Decode batch. #running-req: 8, #token: 36267, "
     "token usage: 0.12, accept len: 2.86, cuda graph: True, gen throughput (token/s): 168.28, #queue-req: 0",  # corpus 024
     DecodeBatch, {"origin.dp_rank": "6", "origin.replica": "TP6", "accept_len": 2.86, "graph": True}),
    ("accept-rate-trailing", "[2025-10-22 10:27:57 TP0] Decode batch. #running-req: 1, #token: 108, "
     "token usage: 0.00, accept len: 2.17, accept rate: 0.54, cuda graph: True, gen throughput (token/s): 0.39, "
     "#queue-req: 0, ",  # corpus 016
     DecodeBatch, {"accept_len": 2.17, "accept_rate": 0.54}),
    ("hybrid-swa", "[2026-05-24 03:51:45 TP0] Decode batch, #running-req: 4, #full token: 2642688, "
     "full token usage: 1.00, #swa token: 14592, swa token usage: 0.06, cuda graph: True, "
     "gen throughput (token/s): 429.52, #queue-req: 3",  # corpus 006
     DecodeBatch, {"kv.used_tokens": 2642688, "kv.pools": {"full": 1.0, "swa": 0.06}, "kv.max_device_ratio": 1.0}),
    ("missing-leading-bracket", "2026-05-24 03:51:44 TP0] Decode batch, #running-req: 4, #full token: 2642688, "
     "full token usage: 1.00, #swa token: 14592, swa token usage: 0.06, cuda graph: True, "
     "gen throughput (token/s): 429.34, #queue-req: 3",  # corpus 006 first line
     DecodeBatch, {"running_req": 4, "origin.replica": "TP0", "origin.log_time": 1779594704.0}),
    ("mamba-decode", "[2025-11-01 10:00:00 TP0] Decode batch, #running-req: 3, #full token: 100, "
     "full token usage: 0.30, mamba num: 3, mamba usage: 0.50, cuda graph: True, "
     "gen throughput (token/s): 9.00, #queue-req: 0, ",  # notes 2025-10-13
     DecodeBatch, {"kv.pools": {"full": 0.30, "mamba": 0.50}, "kv.used_tokens": 100}),
    ("hisparse", "[2026-04-20 10:00:00 TP0] Decode batch, #running-req: 5, #gpu token: 900, gpu token usage: 0.40, "
     "#cpu token: 20000, cpu token usage: 0.99, cuda graph: True, gen throughput (token/s): 140.00, "
     "#queue-req: 0",  # notes 2026-04-14
     DecodeBatch, {"kv.used_tokens": 900, "kv.pools": {"gpu": 0.40, "cpu": 0.99}, "kv.max_device_ratio": 0.40}),
    ("pd-decode-fields", "[2026-03-02 14:44:10 TP0] Decode batch, #running-req: 1, #token: 33, token usage: 0.00, "
     "pre-allocated usage: 0.00, #prealloc-req: 0, #transfer-req: 0, #retracted-req: 0, cuda graph: True, "
     "gen throughput (token/s): 0.04, #queue-req: 0",  # corpus 028
     DecodeBatch, {"pd_queues": {"prealloc": 0, "transfer": 0, "retracted": 0}, "preallocated_usage": 0.0}),
    ("fork-level-pid-file-line", "2025-12-04 20:35:53 INFO 151972 [scheduler_metrics_mixin.py:287] "
     "Decode batch. #running-req: 48, #token: 5814, token usage: 0.00, accept len: 1.00, accept rate: 0.11, "
     "cuda graph: False, gen throughput (token/s): 5399.46, #queue-req: 0,",  # corpus 017
     DecodeBatch, {"running_req": 48, "origin.dp_rank": "0", "origin.replica": "", "origin.log_time": 1764880553.0}),
    ("ray-actor-prefix", "(SGLangEngine pid=41820) [2026-03-22 13:53:37 TP0] Decode batch, #running-req: 6, "
     "#token: 42414, token usage: 0.04, cuda graph: True, gen throughput (token/s): 1374.02, #queue-req: 0,",  # corpus 039
     DecodeBatch, {"running_req": 6, "origin.replica": "TP0"}),
    ("ms-timestamp-all-tags", "[2026-03-05 10:00:00.123 DP1 PP2 ATTN_CP3 MOE_DP4 TP5 EP6] Decode batch, "
     "#running-req: 2, #token: 10, token usage: 0.01, cuda graph: True, gen throughput (token/s): 1.00, "
     "#queue-req: 0",  # notes 2026-03-05 tag order + SGLANG_LOG_MS
     DecodeBatch, {"origin.dp_rank": "1", "origin.replica": "PP2 ATTN_CP3 MOE_DP4 TP5 EP6"}),
    ("legacy-tag-order", "[2025-10-02 10:00:00 DP1 TP5 EP5 PP1] Decode batch, #running-req: 2, #token: 10, "
     "token usage: 0.01, cuda graph: True, gen throughput (token/s): 1.00, #queue-req: 0",  # notes 2025-10-01 order
     DecodeBatch, {"origin.dp_rank": "1", "origin.replica": "PP1 TP5 EP5"}),
    ("junk-before-bracket", "\x1b[0mxyz[2026-04-08 14:05:21 TP0] Decode batch, #running-req: 5, #token: 20800, "
     "token usage: 0.29, cuda graph: True, gen throughput (token/s): 144.95, #queue-req: 0",  # corpus 003 + junk
     DecodeBatch, {"running_req": 5, "origin.replica": "TP0"}),
    ("iso-foreign-prefix", "2026-03-01T10:00:00.5Z INFO sglang.srt.managers.scheduler: [2026-03-01 10:00:00 TP0] "
     "Decode batch, #running-req: 7, #token: 10, token usage: 0.01, cuda graph: True, "
     "gen throughput (token/s): 1.00, #queue-req: 2",  # another framework's logger around SGLang's line
     DecodeBatch, {"running_req": 7, "queue_req": 2, "origin.replica": "TP0"}),
    ("spec-dspark-fields", "[2026-07-21 10:00:00 TP0] Decode batch [77], #running-req: 4, #token: 2048, "
     "token usage: 0.02, accept len: 2.85, accept rate: 0.71, cap len: 3.00, block accept len: 2.50, "
     "cuda graph: True, gen throughput (token/s): 512.00, #queue-req: 0, est. decode TFLOPS/s (per GPU): 1.00, "
     "est. read BW (GB/s per GPU): 2.00, est. write BW (GB/s per GPU): 3.00",  # notes NOW decode
     DecodeBatch, {"running_req": 4, "accept_len": 2.85}),
    # --- Retraction lines of every era ----------------------------------------------------------
    ("e24a-retract", "decode out of memory happened, #retracted_reqs: 1, #new_token_ratio: 0.4000 -> 0.5000",  # notes E24a
     Retraction, {"retracted_reqs": 1, "new_token_ratio_before": 0.4, "new_token_ratio_after": 0.5}),
    ("l24-retract-tp13", "[2025-03-07 21:49:33 TP13] Decode out of memory happened. #retracted_reqs: 1, "
     "#new_token_ratio: 0.1474 -> 0.1845",  # corpus 007
     Retraction, {"retracted_reqs": 1, "new_token_ratio_after": 0.1845, "origin.replica": "TP13"}),
    ("kv-full-tokens-gained", "[2026-09-13 16:06:07] KV cache pool is full. Retract requests. #retracted_reqs: 1, "
     "#new_tokens_gained: 646, #new_token_ratio: 0.0980 -> 0.3487",  # corpus 008
     Retraction, {"retracted_reqs": 1, "new_tokens_gained": 646, "new_token_ratio_before": 0.098}),
    ("aborted-retracted", "[2025-10-10 10:00:00 TP0] KV cache pool is full. Retract requests. #retracted_reqs: 3, "
     "#aborted_retracted_reqs: 1, #new_token_ratio: 0.4000 -> 0.5000",  # notes 2025-10-01
     Retraction, {"retracted_reqs": 3, "aborted_retracted_reqs": 1}),
    ("mamba-num-gained", "[2026-05-01 10:00:00 DP2 TP2] KV cache pool is full. Retract requests. #retracted_reqs: 2, "
     "#new_tokens_gained: 3072, #mamba_num_gained: 2, #new_token_ratio: 0.4000 -> 0.5000",  # notes 2026-04-21
     Retraction, {"retracted_reqs": 2, "new_tokens_gained": 3072, "origin.dp_rank": "2"}),
    ("testing-retraction", "[2026-01-01 10:00:00 TP0] Testing retraction. #retracted_reqs: 2, #new_tokens_gained: 10",
     Retraction, {"retracted_reqs": 2, "new_tokens_gained": 10, "new_token_ratio_after": None}),
    ("omni-bracket-level", "2026-04-05 10:00:00,123 [WARNING] sglang_omni.engines.ar.sglang_backend.scheduler.decode: "
     "KV cache pool is full. Retract requests. #retracted_reqs: 1, #new_tokens_gained: 512, "
     "#new_token_ratio: 0.3000 -> 0.4000",  # notes: docs/log-format.md#sglang-omni
     Retraction, {"new_tokens_gained": 512, "origin.log_time": 1775383200.123}),
    ("omni-python-default", "WARNING:sglang_omni.engines.ar.sglang_backend.scheduler.decode:KV cache pool is full. "
     "Retract requests. #retracted_reqs: 1, #new_tokens_gained: 5, #new_token_ratio: 0.3000 -> 0.4000",  # notes 14
     Retraction, {"retracted_reqs": 1, "origin.log_time": None}),
    ("abort-on-oom", "[2026-03-12 10:00:00 TP0] retract_decode: aborted last request abc123 due to OOM",  # notes 8
     RetractAbort, {"origin.replica": "TP0"}),
    # --- Start-up lines -------------------------------------------------------------------------
    ("capacity-2025", "[2026-09-13 16:05:21] max_total_num_tokens=87552, chunked_prefill_size=2048, "
     "max_prefill_tokens=16384, max_running_requests=2048, context_len=32768, available_gpu_mem=1.91 GB",  # corpus 009
     Capacity, {"max_total_num_tokens": 87552, "max_running_requests": 2048, "context_len": 32768,
                "chunked_prefill_size": 2048, "max_prefill_tokens": 16384}),
    ("capacity-e24b", "[gpu_id=0] max_total_num_tokens=100000, max_prefill_tokens=16384, context_len=4096",  # notes 9
     Capacity, {"max_total_num_tokens": 100000, "max_running_requests": None, "context_len": 4096}),
    ("server-args", "[2025-07-05 10:00:00] server_args=ServerArgs(model_path='/models/x', tp_size=1, "
     "chunked_prefill_size=8192, max_running_requests=None, decode_log_interval=20, "
     "prefill_max_running_requests=7)",  # ServerArgs dataclass repr
     ServerArgs, {"decode_log_interval": 20, "chunked_prefill_size": 8192, "max_running_requests": None}),
    ("server-args-dict-0.5.23", "[2026-12-01 21:20:50] server_args={'model_path': 'model', 'tokenizer_path': "
     "'model', 'json_model_override_args': '{}', 'max_running_requests': 32, 'max_total_tokens': 3000, "
     "'chunked_prefill_size': 4096, 'tp_size': 1, 'pp_size': 1, 'dp_size': 2, 'attn_dp_size': 1, "
     "'decode_log_interval': 1, 'cuda_graph_config': {'decode': {'max_bs': 32, 'bs': [1, 2]}}}",  # real 0.5.23 run
     ServerArgs, {"decode_log_interval": 1, "chunked_prefill_size": 4096, "max_running_requests": 32,
                  "rank_sizes": {"DP": 2, "TP": 1, "PP": 1}}),
    ("server-args-dict-level-word", "2026-09-26T19:55:58.468Z host INFO server_args={'model_path': 'm', "
     "'max_running_requests': None, 'decode_log_interval': 10}",  # hosted platforms' prefix
     ServerArgs, {"decode_log_interval": 10, "max_running_requests": None, "origin.log_time": 1790452558.468}),
    ("server-args-repr-level-word", "2026-09-26T19:55:58.468Z host INFO server_args=ServerArgs(model_path='m', "
     "decode_log_interval=5)", ServerArgs, {"decode_log_interval": 5}),
    ("decode-level-word", "2026-09-26T19:55:58.468Z host INFO Decode batch, #running-req: 7, #token: 2716, "
     "token usage: 0.91, cpu graph: False, gen throughput (token/s): 517.15, #queue-req: 66",
     DecodeBatch, {"running_req": 7, "queue_req": 66}),
    # --- SGLang 0.5.21+ fragments (read from the 0.5.23 source, metrics_reporter.py / kv_pool_runtime.py) ---
    ("prefill-replay-token-0.5.21", "[2026-12-01 21:20:50] Prefill batch, #new-seq: 3, #new-token: 433, #cached-token: 0, "
     "token usage: 0.66, #running-req: 9, #queue-req: 97, #pending-token: 14745, #replay-token: 12, cpu graph: False, "
     "input throughput (token/s): 7997.04", PrefillBatch, {"new_token": 433, "replay_token": 12, "queue_req": 97}),
    ("decode-fwd-occupancy-0.5.21", "[2026-12-01 21:20:50] Decode batch, #running-req: 7, #token: 2716, token usage: 0.91, "
     "cpu graph: False, gen throughput (token/s): 517.15, #queue-req: 66, fwd occupancy: 93.10%, "
     "fwd+idle occupancy: 99.00%", DecodeBatch, {"running_req": 7, "queue_req": 66, "gen_throughput": 517.15}),
    ("decode-host-receive-0.5.21", "[2026-12-01 21:20:50] Decode batch, #running-req: 7, #token: 2716, token usage: 0.91, "
     "pre-allocated usage: 0.10, #prealloc-req: 1, #transfer-req: 2, #host-receive-req: 3, #retracted-req: 0, "
     "cpu graph: False, gen throughput (token/s): 517.15, #queue-req: 66",
     DecodeBatch, {"pd_queues": {"prealloc": 1, "transfer": 2, "host_receive": 3, "retracted": 0}}),
    ("kv-post-capture-0.5.21", "[2026-12-01 21:20:50] Post-capture KV sizing: KV cache allocated. dtype: torch.bfloat16, "
     "#tokens: 5000, KV size: 1.00 GB, avail mem=3.00 GB", KvAllocation,
     {"tokens": 5000, "post_capture": True, "size_bytes": float(1 << 30)}),
    ("retract-abort-0.5.21", "[2026-12-01 21:20:50 TP0] retract_decode: aborted request abc: Retracted under decode "
     "memory pressure without a KV backup. Retry later.", RetractAbort, {"origin.replica": "TP0"}),
    ("req-time-stats-2025", "[2025-06-01 10:00:00 TP0] Req Time Stats(rid=abc, input len=100, output len=20, "
     "type=unified): queue_duration=12.50ms, forward_duration=300.00ms, start_time=1.0",  # notes 9
     ReqTimeStats, {"queue_duration": 0.0125, "input_len": 100, "output_len": 20}),
    ("req-time-stats-2026", "[2026-07-20 10:00:00 DP1 TP4] ReqTimeStats(rid=abc, input_len=100, cached_input_len=40, "
     "output_len=20, attempts=2, type=unified): queue_duration=1500.00ms, forward_duration=3.00ms, "
     "entry_time=1.000",  # notes 9
     ReqTimeStats, {"queue_duration": 1.5, "cached_input_len": 40, "attempts": 2, "origin.dp_rank": "1"}),
    ("req-time-stats-pd-decode", "[2026-07-20 10:00:00 TP0] ReqTimeStats(rid=x, input_len=5, output_len=1, "
     "type=decode): bootstrap_duration=1.00ms, alloc_wait_duration=2.00ms, prealloc_queue_duration=9.00ms, "
     "transfer_duration=3.00ms, queue_duration=4.00ms, forward_duration=5.00ms, entry_time=1.0",
     ReqTimeStats, {"queue_duration": 0.004}),
]


def _get(obj, dotted: str):
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


@pytest.mark.parametrize("line,etype,expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_line_kinds(line, etype, expected):
    event = parse_line(line)
    assert type(event) is etype, event
    for key, want in expected.items():
        got = _get(event, key)
        if isinstance(want, float):
            assert got == pytest.approx(want), key
        elif isinstance(want, dict):
            assert got == pytest.approx(want) if all(isinstance(v, float) for v in want.values()) else got == want, key
        else:
            assert got == want, key


IGNORED = [
    '[2026-09-13 16:05:59] INFO:     127.0.0.1:51024 - "POST /generate HTTP/1.1" 200 OK',  # corpus 008
    "[2026-01-29 13:12:36 PP1 TP0] Scheduler debug info:",  # corpus 033
    "self.max_total_num_tokens=1180096, available_size=1180032, evictable_size=0, protected_size=0",  # corpus 033
    "Cache not flushed because there are pending requests. #queue-req: 3, #running-req: 2",  # notes 9
    "[2025-02-26 15:44:36] Receive: obj=GenerateReqInput(text='please say Decode batch, #running-req: 99')",
    "  0%|          | 0/7 [00:00<?, ?it/s]Capturing batches (bs=24 avail_mem=2.04 GB)",  # corpus 009
    "E0219 16:32:42.940686 572100 rdma_transport.cpp:529] Memory region not registered",  # corpus 010
    "2026-03-14 12:11:55,950 [INFO] sglang_omni.pipeline.coordinator: Coordinator registered stage: thinker",
    "",
    "\x00\x00\x00",
]


@pytest.mark.parametrize("line", IGNORED)
def test_unrelated_lines_are_ignored(line):
    assert parse_line(line) is None


DAMAGED = [
    # corpus 001: terminal-truncated and spliced lines
    ("decode", "[2026-05-28 02:59:59 TP0] Decode batch, #running-req: 45, #token: 44672, token usaccept rate: 0.32, "
     "npu graph: False, gen throughput (token/s): 863.65, #queue-req"),
    ("prefill", "[2026-05-28 02:59:59 TP0] Prefill batch, #new-seq: 1, #new-token: 896, #cached-tounning-req: 45, "
     "#queue-req: 81, #pending-token: 70187, npu graph: False, input th"),
    ("decode", "[2026-01-01 10:00:00 TP0] Decode batch, #token: 10, token usage: 0.5, #queue-req: 1"),  # no running
    ("decode", "[2026-01-01 10:00:00 TP0] Decode batch, #running-req: 4x, #queue-req: 1"),
    ("decode", "[2026-01-01 10:00:00 TP0] Decode batch, #running-req: 4, cuda graph: Maybe, #queue-req: 1"),
    ("decode", "[2026-01-01 10:00:00 TP0] Decode batch, #running-req: 4, token usage: nan, #queue-req: 1"),
    ("retraction", "[2026-01-01 10:00:00 TP0] KV cache pool is full. Retract requests. #retracted_reqs: 1, "
     "#new_token_ratio: 0.3"),
    ("retraction", "[2026-01-01 10:00:00 TP0] KV cache pool is full. Retract requests. #new_tokens_gained: 5"),
    ("prefill", "[2026-01-01 10:00:00 TP0] Prefill batch(mixed #running-req: 7"),
]


@pytest.mark.parametrize("kind,line", DAMAGED)
def test_damaged_lines_are_malformed_not_applied(kind, line):
    event = parse_line(line)
    assert isinstance(event, Malformed), event
    assert event.kind == kind


def test_origin_memo_returns_equal_results():
    a = parse_origin("[2026-07-21 10:00:00 DP3 TP3 EP3] ")
    b = parse_origin("[2026-07-21 10:00:00 DP3 TP3 EP3] ")
    assert a == b and a.dp_rank == "3" and a.replica == "TP3 EP3"


def test_every_truncation_and_splice_of_real_lines_never_raises():
    """Cut every scheduler line of the corpus at every position, and splice pairs: no exception,
    and the result is always an event, Malformed or None."""
    from conftest import corpus_files

    lines = []
    for path in corpus_files():
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            if "batch" in line or "Retract" in line or "memory happened" in line or "max_total" in line:
                lines.append(line)
    assert len(lines) > 100
    for line in lines:
        for cut in range(0, len(line), 3):
            parse_line(line[:cut])
            parse_line(line[cut:])
    for a, b in zip(lines, lines[1:]):
        for cut in (len(a) // 3, len(a) // 2):
            parse_line(a[:cut] + b[cut // 2:])


HOSTILE_VALUES = [
    ("decode", "[2026-09-13 16:05:58] Decode batch, #running-req: " + "9" * 400 + ", #token: 1, token usage: 0.5, "
     "cuda graph: False, gen throughput (token/s): 1, #queue-req: 0"),
    ("decode", "[2026-09-13 16:05:58] Decode batch, #running-req: 18446744073709551617, #queue-req: 0"),
    ("decode", "[2026-09-13 16:05:58] Decode batch, #running-req: -5, #queue-req: 0"),
    ("decode", "[2026-09-13 16:05:58] Decode batch, #running-req: 1_000, #queue-req: 0"),
    ("decode", "[2026-09-13 16:05:58] Decode batch, #running-req: 5, #token: 100, token usage: 0.5, accept len: inf, "
     "cuda graph: True, gen throughput (token/s): 1.0, #queue-req: 0"),
    ("decode", "[2026-09-13 16:05:58] Decode batch, #running-req: 5, accept len: -5, #queue-req: 0"),
    ("decode", "[2026-09-13 16:05:58] Decode batch, #running-req: 5, token usage: 1e308, #queue-req: 0"),
    ("decode", "[2026-09-13 16:05:58] Decode batch, #running-req: 5, token usage: nan, #queue-req: 0"),
    ("retraction", "[2026-09-13 16:06:07] KV cache pool is full. Retract requests. #retracted_reqs: 1, "
     "#new_tokens_gained: 646, #new_token_ratio: -inf -> 0.3487"),
]


@pytest.mark.parametrize("kind,line", HOSTILE_VALUES)
def test_values_sglang_never_prints_are_damage(kind, line):
    event = parse_line(line)
    assert isinstance(event, Malformed) and event.kind == kind, event


def test_huge_numbers_in_regex_read_fields_are_not_taken():
    sa = parse_line("[2026-01-01 10:00:00] server_args=ServerArgs(decode_log_interval=" + "9" * 400 + ")")
    assert isinstance(sa, Malformed)  # no setting could be read: not applied, and not counted parsed
    sa = parse_line("[2026-01-01 10:00:00] server_args=ServerArgs(decode_log_interval=" + "9" * 400 + ", tp_size=2)")
    assert isinstance(sa, ServerArgs) and sa.decode_log_interval is None and sa.rank_sizes == {"TP": 2}
    assert isinstance(parse_line("[2026-01-01 10:00:00] server_args=ServerArgs(decode_log_interval=0)"), Malformed)
    rts = parse_line("[2026-07-20 10:00:00 TP0] ReqTimeStats(rid=a, input_len=" + "9" * 50 + ", type=unified): "
                     "queue_duration=" + "9" * 400 + ".0ms, forward_duration=1.00ms")
    assert isinstance(rts, Malformed)


@pytest.mark.parametrize("line", [
    # --log-requests repr: the prompt imitates a scheduler line, with and without a closing quote
    "[2026-09-13 16:05:58] Receive: obj=GenerateReqInput(text='hi [2026-09-13 16:05:58] Decode batch, "
    "#running-req: 99999, #token: 1, token usage: 0.5, cuda graph: False, gen throughput (token/s): 1, "
    "#queue-req: 0, zz: ', sampling_params={'max_new_tokens': 8}, zz: 1)",
    # --log-requests-format json
    '{"timestamp": "2026-01-01T10:00:00", "event": "request.received", "obj": {"text": "x] Decode batch, '
    '#running-req: 99999, #queue-req: 0, a: b"}}',
    "[2026-09-13 16:05:58] Finish: obj=GenerateReqInput(text=['a'], rid=x) KV cache pool is full. Retract requests. "
    "#retracted_reqs: 500",
])
def test_prompts_in_request_logs_cannot_forge_scheduler_lines(line):
    assert parse_line(line) is None


def test_rank_tags_are_normalised_and_bounded():
    assert parse_origin("[2026-01-01 10:00:00 DP007 TP03] ").dp_rank == "7"
    assert parse_origin("[2026-01-01 10:00:00 DP007 TP03] ").replica == "TP3"
    assert parse_origin("[2026-01-01 10:00:00 DP" + "1" * 50 + " TP0] ").dp_rank == "0"
    assert parse_origin("[gpu_id=" + "1" * 50 + "] ").dp_rank == "0"


# --- issue 12 item 1: a scheduler line glued after other output --------------------------------

GLUED = [
    ("Sure, here's what I'd suggest[2025-07-01 10:00:00] Decode batch. #running-req: 3, #token: 90, "
     "token usage: 0.01, cuda graph: False, gen throughput (token/s): 100.00, #queue-req: 0",
     DecodeBatch, {"running_req": 3, "kv.used_tokens": 90, "queue_req": 0, "origin.log_time": 1751364000.0}),
    ("' done.[2025-07-01 10:00:01] Prefill batch. #new-seq: 1, #new-token: 8, #cached-token: 0, token usage: 0.00, "
     "#running-req: 0, #queue-req: 0",
     PrefillBatch, {"new_seq": 1, "new_token": 8, "origin.log_time": 1751364001.0}),
    # model output with both quote kinds, glued before a tagged prefix and before SGLang Omni's prefix
    ('He said "no" and \'yes\'[2026-07-21 10:00:00 DP3 TP3] Decode batch, #running-req: 7, #queue-req: 1',
     DecodeBatch, {"running_req": 7, "origin.dp_rank": "3", "origin.replica": "TP3"}),
    ("it's done2026-04-05 10:00:00,123 [WARNING] sglang_omni.engines.ar: KV cache pool is full. Retract requests. "
     "#retracted_reqs: 2, #new_token_ratio: 0.5000 -> 0.7000",
     Retraction, {"retracted_reqs": 2, "origin.log_time": 1775383200.123}),
]


@pytest.mark.parametrize("line,etype,expected", GLUED)
def test_a_scheduler_line_glued_after_other_output_parses(line, etype, expected):
    test_line_kinds(line, etype, expected)


@pytest.mark.parametrize("line", [
    # --log-requests repr of a prompt holding a bracketed time stamp and a title, closing quote after it
    "[2026-09-13 16:05:58] Receive: text='x[2026-09-13 16:05:58] Decode batch, #running-req: 99999, "
    "#queue-req: 0, zz: 1', sampling_params={}",
    # the same without any logger prefix (a wrapper printing requests): the quote closes after the imitation
    "prompt='x[2026-09-13 16:05:58] Decode batch, #running-req: 99999, #queue-req: 0, zz: 1'",
    '{"text": "x[2026-09-13 16:05:58] Prefill batch, #new-seq: 9999, #new-token: 9, #queue-req: 0, a: b"}',
    # the prompt's own time stamp sits inside the quotes: the record's stamp comes after a quote
    "[2026-09-13 16:05:58] Finish: text='[2026-09-13 16:05:58] Decode batch, #running-req: 99999, #queue-req: 0",
    "'10:00:00' [2026-09-13 16:05:58] Decode batch, #running-req: 99999, #queue-req: 0",
    # a quote with no time stamp after it cannot be told from a prompt
    "prompt: 'x] Decode batch, #running-req: 99999, #queue-req: 0",
    "text='x: KV cache pool is full. Retract requests. #retracted_reqs: 500",
])
def test_a_quoted_prompt_with_a_time_stamp_and_a_title_forges_nothing(line):
    assert parse_line(line) is None


# --- item 2: SGLang's "not set" values on the capacity line ------------------------------------

def test_capacity_line_with_chunked_prefill_off():
    cap = parse_line("[2025-10-02 08:00:00] max_total_num_tokens=40960, chunked_prefill_size=-1, "
                     "max_prefill_tokens=16384, max_running_requests=256, context_len=32768, available_gpu_mem=60.10 GB")
    assert isinstance(cap, Capacity)
    assert (cap.max_total_num_tokens, cap.max_running_requests, cap.context_len, cap.chunked_prefill_size,
            cap.max_prefill_tokens) == (40960, 256, 32768, None, 16384)
    cap = parse_line("[2025-10-02 08:00:00] max_total_num_tokens=40960, chunked_prefill_size=None, "
                     "max_prefill_tokens=16384, max_running_requests=None, context_len=32768")
    assert (cap.max_total_num_tokens, cap.chunked_prefill_size, cap.max_running_requests) == (40960, None, None)
    for bad in ("chunked_prefill_size=-2", "chunked_prefill_size=x", "max_running_requests=-1.5"):
        line = f"[2025-10-02 08:00:00] max_total_num_tokens=40960, {bad}, context_len=32768"
        assert isinstance(parse_line(line), Malformed), bad
    assert isinstance(parse_line("[2025-10-02 08:00:00] max_total_num_tokens=-1, context_len=1"), Malformed)


# --- item 3: the KV-allocation line --------------------------------------------------------------

@pytest.mark.parametrize("line,tokens,gib", [
    ("[2026-07-10 11:00:00 TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 500000, K size: 7.63 GB, "
     "V size: 7.63 GB", 500000, 15.26),
    ("[2025-05-15 11:59:26 TP1] KV Cache is allocated. #tokens: 334289, K size: 24.23 GB, V size: 24.23 GB",  # 035
     334289, 48.46),
    ("[2025-05-15 11:59:26 DP1 TP1] KV Cache is allocated. #tokens: 1005629, KV size: 65.23 GB", 1005629, 65.23),
    ("2026-08-20 10:05:12,331 [INFO] sglang.srt.mem_cache.memory_pool: KV Cache is allocated. dtype: "
     "torch.bfloat16, #tokens: 262144, K size: 12.00 GB, V size: 12.00 GB", 262144, 24.0),  # SGLang Omni
    ("[2026-09-22 19:53:38] KV Cache is allocated. dtype: torch.float8_e4m3fn, #tokens: 914573", 914573, None),
])
def test_kv_allocation_line(line, tokens, gib):
    ev = parse_line(line)
    assert isinstance(ev, KvAllocation) and ev.tokens == tokens
    assert ev.size_bytes == (None if gib is None else pytest.approx(gib * 2**30))


@pytest.mark.parametrize("body", [
    "#tokens: 1" + "0" * 20 + ", K size: 1 GB, V size: 1 GB", "#tokens: 100, K size: 1.2.3 GB, V size: 1 GB",
    "#tokens: 100, KV size: inf GB", "#tokens: 100, K size: 1 GB", "#tokens: 100, KV size: 3 TB",
    "dtype: torch.bfloat16, K size: 1 GB, V size: 1 GB", "#tokens: -5, KV size: 1 GB",
])
def test_damaged_kv_allocation_lines_are_malformed(body):
    ev = parse_line(f"[2026-09-13 16:05:10] KV Cache is allocated. {body}")
    assert isinstance(ev, Malformed) and ev.kind == "kv_allocation", ev


# --- item 4: another program's line under a known title ------------------------------------------

@pytest.mark.parametrize("line", [
    "[2025-10-11 11:00:00] Prefill batch. #bid: 3, #cache_miss: 2",  # SGLang-JAX, beside its real prefill line
    "[2025-10-11 11:00:00] Decode batch. #bid: 3, #cache_miss: 2",
    "[2025-10-11 11:00:00] KV cache pool is full. Retract requests. #bid: 3",
    "[2025-10-11 11:00:00] KV Cache is allocated. pool: host, layers: 4",
])
def test_a_foreign_body_under_a_known_title_is_ignored_not_malformed(line):
    assert parse_line(line) is None


def test_sglang_jax_real_lines_parse():
    prefill = parse_line("[2025-10-11 11:00:00] Prefill batch. #new-seq: 3, #new-token: 96, #cached-token: 0, "
                         "token usage: 0.01, #running-req: 4, #prefill per DP: [1, 2], #running per DP: [3, 1], "
                         "#queue-req: 0, ")
    assert isinstance(prefill, PrefillBatch) and (prefill.new_seq, prefill.queue_req) == (3, 0)
    decode = parse_line("[2025-10-11 11:00:01] Decode batch. #running-req: 4, #token: 500, token usage: 0.02, "
                        "#running-req per DP: [3, 1], accept-len 2.50, accept-ratio 0.60, "
                        "gen throughput (token/s): 90.00, #queue-req: 0, #cache_miss: 1")
    assert isinstance(decode, DecodeBatch)
    assert (decode.running_req, decode.accept_len, decode.accept_rate) == (4, 2.5, 0.6)
    unclosed = parse_line("[2025-10-11 11:00:00] Prefill batch. #new-seq: 3, #new-token: 96, #prefill per DP: [1, 2")
    assert isinstance(unclosed, Malformed)


# --- item 5: usage above 1 and non-ASCII digits ---------------------------------------------------

@pytest.mark.parametrize("fragment", [
    "token usage: 1.01", "#full token: 5, full token usage: 1.50, #swa token: 1, swa token usage: 0.10",
    "mamba usage: 2.00", "gpu token usage: 1.2, cpu token usage: 0.5", "token usage: 0.5, pre-allocated usage: 1.30",
])
def test_usage_above_1_is_damage(fragment):
    ev = parse_line(f"[2026-01-01 10:00:00 TP0] Decode batch, #running-req: 4, {fragment}, #queue-req: 1")
    assert isinstance(ev, Malformed) and ev.kind == "decode", ev
    ok = parse_line("[2026-01-01 10:00:00 TP0] Decode batch, #running-req: 4, token usage: 1.00, #queue-req: 1")
    assert isinstance(ok, DecodeBatch) and ok.kv.pools == {"kv": 1.0}


# Fullwidth and Arabic-Indic digits: int() and float() read them, SGLang never prints them.
NON_ASCII = ["\uff15", "\u0665", "0.\u0665", "\uff10.\uff15"]


@pytest.mark.parametrize("digits", NON_ASCII)
@pytest.mark.parametrize("kind,template", [
    ("decode", "[2026-01-01 10:00:00 TP0] Decode batch, #running-req: {d}, #queue-req: 1"),
    ("decode", "[2026-01-01 10:00:00 TP0] Decode batch, #running-req: 4, token usage: {d}, #queue-req: 1"),
    ("decode", "[2026-01-01 10:00:00 TP0] Decode batch, #running-req: 4, accept len: {d}, #queue-req: 1"),
    ("decode", "[2026-01-01 10:00:00 TP0] Decode batch, #running-req: 4, gen throughput (token/s): {d}"),
    ("prefill", "[2026-01-01 10:00:00 TP0] Prefill batch, #new-seq: 1, #new-token: {d}, #queue-req: 1"),
    ("retraction", "[2026-01-01 10:00:00 TP0] KV cache pool is full. Retract requests. #retracted_reqs: 1, "
                   "#new_token_ratio: {d} -> 0.3"),
    ("capacity", "[2026-01-01 10:00:00 TP0] max_total_num_tokens={d}, context_len=8"),
    ("kv_allocation", "[2026-01-01 10:00:00 TP0] KV Cache is allocated. #tokens: 10, KV size: {d} GB"),
])
def test_non_ascii_digits_are_damage_in_every_field(kind, template, digits):
    ev = parse_line(template.format(d=digits))
    assert isinstance(ev, Malformed) and ev.kind == kind, ev


def test_non_ascii_digits_are_no_rank_time_or_regex_read_value():
    assert parse_origin("[2026-01-01 10:00:00 DP\u0663 TP\uff15] ").dp_rank == "0"
    assert parse_origin("[2026-01-01 10:00:00 DP\u0663 TP\uff15] ").replica == ""
    fullwidth = "".join(chr(ord(c) + 0xFEE0) if c.isdigit() else c for c in "[2026-01-01 10:00:00] ")
    assert parse_origin(fullwidth).log_time is None
    half = parse_origin("[\uff12\uff10\uff12\uff16-01-01 10:00:00] ")  # the date is no date: time of day only
    assert (half.log_time, half.time_of_day_only) == (36000.0, True)
    assert parse_origin("[1\u0660:00:00 TP0] ").log_time is None
    sa = parse_line("[2026-01-01 10:00:00] server_args=ServerArgs(decode_log_interval=\uff15, dp_size=\u0668, "
                    "tp_size=2, chunked_prefill_size=\uff18)")
    assert isinstance(sa, ServerArgs)
    assert (sa.decode_log_interval, sa.chunked_prefill_size, sa.rank_sizes) == (None, None, {"TP": 2})
    rts = parse_line("[2026-07-20 10:00:00 TP0] ReqTimeStats(rid=a, input_len=\uff15, type=unified): "
                     "queue_duration=\u0665.0ms, forward_duration=1.00ms")
    assert isinstance(rts, Malformed)
    tail = parse_line("[2026-01-01 10:00:00 TP0] Decode batch [\uff15], #running-req: 4, #queue-req: 1")
    assert isinstance(tail, Malformed)


def test_server_args_rank_sizes():
    sa = parse_line("[2026-01-01 10:00:00] server_args=ServerArgs(model_path='m', tp_size=8, pp_size=1, dp_size=8, "
                    "attn_tp_size=1, moe_dp_size=2, ep_size=8, attn_cp_size=1, enable_dp_attention=True)")
    assert sa.rank_sizes == {"DP": 8, "TP": 8, "PP": 1, "EP": 8, "ATTN_CP": 1, "MOE_DP": 2}
    old = parse_line("server_args=ServerArgs(model_path='m', tp_size=2, dp_size=2, load_balance_method='round_robin')")
    assert old.rank_sizes == {"DP": 2, "TP": 2}


@pytest.mark.parametrize("line", [
    "[2026-12-01 21:20:50] server_args={'model_path': 'model', 'tokenizer_path': 'model'}",
    "[2026-01-01 10:00:00] server_args=ServerArgs(model_path='m')",
    "[2026-01-01 10:00:00] server_args={'decode_log_interval': 'forty'}",
])
def test_a_settings_line_without_a_known_setting_is_malformed(line):
    """A line counted parsed is a line applied: a dump none of whose settings can be read would
    otherwise count as parsed while the figures fall back to defaults (the 0.5.19+ dict form did)."""
    event = parse_line(line)
    assert isinstance(event, Malformed) and event.kind == "server_args", event


def test_a_level_word_without_a_time_stamp_starts_no_message():
    """``INFO`` alone (no date-time before it) is text, e.g. a prompt that imitates a line."""
    assert parse_line("say INFO Decode batch, #running-req: 7, #queue-req: 66") is None


@pytest.mark.parametrize("line", [
    "[2026-12-01 21:20:50] KV Cache VA upper bound. dtype: torch.bfloat16, #tokens: 90000, K size: 1.00 GB, V size: 1.00 GB",
    "[2026-12-01 21:20:50] Post-capture KV sizing: draft KV cache allocated. dtype: torch.bfloat16, #tokens: 90, KV size: 0.01 GB",
])
def test_reservations_and_draft_pools_are_no_capacity(line):
    """The VA upper bound is a reservation and the draft pool another model's: neither is the capacity."""
    assert parse_line(line) is None


SERVER_ARGS_DUMP = ("[2026-09-13 16:05:00] server_args=ServerArgs(model_path='/models/qwen', tp_size=1, "
                    "chunked_prefill_size=2048, max_running_requests=8, schedule_policy='fcfs', "
                    "json_model_override_args='{\"a\": 1, \"b\": [1, 2]}', {extra}decode_log_interval=40)")


def test_server_args_event_carries_every_setting_nested_values_whole():
    sa = parse_line(SERVER_ARGS_DUMP.replace("{extra}", "lora_paths=['a, b', 'c'], "))
    assert sa.settings["json_model_override_args"] == "'{\"a\": 1, \"b\": [1, 2]}'"
    assert sa.settings["lora_paths"] == "['a, b', 'c']"
    assert sa.settings["decode_log_interval"] == "40" and sa.settings["max_running_requests"] == "8"
    assert split_server_args("no dump here") == {}


@pytest.mark.parametrize("lora", [
    "lora_paths=['/m/a, tp_size=8', \"b'c, decode_log_interval=1\"], ",
    "lora_paths={'x': '/m/x', 'decode_log_interval': 1, 'enable_mixed_chunk': True, 'dp_size': 4}, ",
    "lora_paths=[LoRARef(lora_name='a', lora_path='/p, tp_size=8, chunked_prefill_size=1')], ",
])
def test_server_args_settings_inside_a_lora_paths_value_are_not_read(lora):
    """A ``name=`` (or ``'name': ``) inside a quoted, bracketed or braced value of ``lora_paths`` is part
    of that value, not a setting of the dump: the fields come from the dump's top-level split."""
    for line in (SERVER_ARGS_DUMP.replace("{extra}", lora),
                 "[2026-12-01 21:20:50] server_args={'tp_size': 1, 'chunked_prefill_size': 2048, 'lora_paths': "
                 + lora.partition("=")[2].rstrip(", ") + ", 'max_running_requests': 8, 'decode_log_interval': 40}"):
        sa = parse_line(line)
        assert isinstance(sa, ServerArgs), sa
        assert sa.settings["lora_paths"].startswith(("[", "{")), sa.settings
        assert (sa.decode_log_interval, sa.chunked_prefill_size, sa.max_running_requests) == (40, 2048, 8)
        assert sa.rank_sizes == {"TP": 1} and not sa.enable_mixed_chunk


def test_hybrid_pools_token_counts_are_event_fields():
    swa = parse_line("[2025-09-01 10:00:00 TP0] Decode batch, #running-req: 3, #full token: 400, full token usage: "
                     "0.10, #swa token: 120, swa token usage: 0.20, gen throughput (token/s): 9.0, #queue-req: 0")
    assert (swa.kv.used_tokens, swa.kv.swa_tokens, swa.kv.mamba_num) == (400, 120, None)
    old = parse_line("[2025-07-01 10:00:00 TP0] Decode batch. #running-req: 3, #token: full=400, swa=120, "
                     "token usage: full=0.10, swa=0.20, gen throughput (token/s): 9.0, #queue-req: 0")
    assert (old.kv.used_tokens, old.kv.swa_tokens) == (400, 120)
    mamba = parse_line("[2025-09-01 10:00:00 TP0] Decode batch, #running-req: 3, #full token: 400, full token usage: "
                       "0.10, mamba num: 6, mamba usage: 0.05, gen throughput (token/s): 9.0, #queue-req: 0")
    assert (mamba.kv.mamba_num, mamba.kv.swa_tokens) == (6, None)


def test_line_time_reads_any_lines_leading_stamp():
    assert line_time("[2026-01-01 10:00:00.5 TP0] Load weight end.") == (1767261600.5, False)
    assert line_time("(SGLangEngine pid=3) [2026-01-01 10:00:00] x") == (1767261600.0, False)
    assert line_time("[12:00:01 TP0] x") == (43201.0, True)
    assert line_time("Traceback (most recent call last):") is None
    assert line_time("[25:00:00] x") is None and line_time("2026-13-01 10:00:00 x") is None

"""Checklist section 4: how many requests' KV cache fit, and the ceiling the method recommends.

Figures: ``capacity_tokens`` (the start-up line's ``max_total_num_tokens`` or the ``KV Cache is
allocated`` line's ``#tokens``: exact; else estimated from ``#token`` / ``token usage``);
``mean_tokens_per_running_request`` = sum of ``#token`` / sum of ``#running-req`` over Decode lines,
less the KV pre-allocated for requests still in transfer on a PD decode server (``pre-allocated
usage`` x capacity: those requests are not running yet); ``capacity_requests`` = the smallest over
the pools of the requests each holds: the token pool (capacity / tokens per running request), the
SWA pool of hybrid models (its size / its tokens per running request) and the mamba pool (its size in
request states, ``mamba num / mamba usage``); the safe ceiling is x :data:`SAFETY_FACTOR` and the
offline recommendation :data:`OFFLINE_RANGE` of it, never above it. All estimates (the footprint is
a mean over sampled lines).
"""

from __future__ import annotations

import math

from .basis import ESTIMATE_MIN_USAGE, Basis, pool_size_estimate
from .domains import AMOUNT, COUNT, FREE, LABEL, POSITIVE, REASONS, SHARE, VERDICT, Dist, Figures, MapOf, Range, verdict
from .fmt import num
from .stats import distribution, plural, ratio

from ..limits import in_value_range
from ..method import OFFLINE_RANGE, SAFETY_FACTOR, capacity_requests, kv_tokens_per_request, safe_capacity



def config_number(text: str) -> float | None:
    """``text`` (a model config's value) as a number the parser accepts too
    (:func:`~exporter.limits.in_value_range`, ASCII digits only), else ``None``. Never raises."""
    if len(text) > 40 or not text.isascii():  # huge digit strings; non-ASCII digits, as in the parser
        return None
    try:
        x = float(text)
    except ValueError:
        return None
    return x if in_value_range(x) else None


DOMAINS = {
    "capacity_tokens": COUNT,
    "capacity_source": LABEL,
    "capacity_estimate_range": Range(COUNT),
    "mean_tokens_per_running_request": AMOUNT,
    "tokens_per_running_request": Dist(AMOUNT),
    "preallocated_tokens_excluded": AMOUNT,
    "capacity_requests": AMOUNT,
    "capacity_requests_by_pool": MapOf(AMOUNT),
    "capacity_limiting_pool": LABEL,
    "safety_factor": SHARE,
    "safe_ceiling_requests": POSITIVE,
    "recommended_max_running_requests_offline": Range(POSITIVE),
    "max_running_requests": POSITIVE,
    "decode_batch_p99": COUNT,
    "dp_ranks": COUNT,
    "capacity_scope": LABEL,
    "model": FREE,
    "verdict": VERDICT,
    "not_available": REASONS,
}


def model_kv_bytes_per_token(config: dict, tp_size: int, kv_bytes: float | None) -> dict:
    """Per-token KV size of one tensor-parallel rank from a Hugging Face ``config.json``.

    Standard attention: ``2 x layers x (KV heads / TP) x head_dim x bytes`` (K and V; KV heads are
    replicated when fewer than TP ranks). MLA (``kv_lora_rank`` present, DeepSeek): one latent of
    ``kv_lora_rank + qk_rope_head_dim`` per layer, replicated on every rank.

    Raises:
        ValueError: the config is not a JSON object, or a required key is missing or not a positive
            whole number.
    """
    if not isinstance(config, dict):
        raise ValueError("not a JSON object")
    cfg = config.get("text_config", config) if "num_hidden_layers" not in config else config
    if not isinstance(cfg, dict):
        raise ValueError("text_config is not a JSON object")

    def whole(key: str, required: bool = True, zero: bool = False) -> int | None:
        v = cfg.get(key)
        if v is None and not required:
            return None
        if isinstance(v, bool) or not isinstance(v, (int, float, str)):
            raise ValueError(f"{key} missing or not a number")
        x = config_number(str(v))
        if x is None or x != int(x) or (x == 0 and not zero) or x > 1 << 24:
            raise ValueError(f"{key}: {str(v)[:40]!r} is not a positive whole number")
        return int(x)

    layers = whole("num_hidden_layers")
    dtype = str(cfg.get("torch_dtype") or config.get("torch_dtype") or cfg.get("dtype") or "bfloat16")
    elem = kv_bytes if kv_bytes else {"float32": 4, "float64": 8}.get(dtype.replace("torch.", ""), 2)
    if cfg.get("kv_lora_rank"):
        rank, rope = whole("kv_lora_rank"), whole("qk_rope_head_dim", required=False, zero=True) or 0
        per_token = layers * (rank + rope) * elem
        formula = f"{layers} layers x ({rank} + {rope}) latent x {elem:g} B (MLA)"
        return {"bytes_per_token": per_token, "formula": formula, "attention": "mla",
                "layers": layers, "kv_heads_per_rank": None, "head_dim": None, "element_bytes": elem}
    heads = whole("num_attention_heads")
    kv_heads = whole("num_key_value_heads", required=False, zero=True) or heads
    head_dim = whole("head_dim", required=False, zero=True) or whole("hidden_size") // heads
    if head_dim == 0:
        raise ValueError("hidden_size is smaller than num_attention_heads")
    per_rank = max(1, kv_heads // max(tp_size, 1)) if kv_heads >= tp_size else 1
    per_token = 2 * layers * per_rank * head_dim * elem
    formula = f"2 x {layers} layers x {per_rank} KV heads/rank x {head_dim} head dim x {elem:g} B"
    return {"bytes_per_token": per_token, "formula": formula, "attention": "mha/gqa", "layers": layers,
            "kv_heads_per_rank": per_rank, "head_dim": head_dim, "element_bytes": elem}


def _footprints(b: Basis) -> tuple[list[tuple[float, int]], list[float]]:
    """Per Decode line with ``#token``: (KV tokens of the running requests, ``#running-req``), and the
    tokens pre-allocated for transfers that were left out (PD decode)."""
    rows, prealloc = [], []
    for r in b.decode:
        if r.used_tokens is None or r.running <= 0:
            continue
        held = 0.0
        if r.prealloc_ratio:
            cap = b.capacity_tokens if b.capacity_exact else (r.used_tokens / r.pool_ratio if r.pool_ratio else b.capacity_tokens)
            if cap is None:
                continue  # pre-allocated KV that cannot be sized: the line's footprint is unknown
            held = min(r.prealloc_ratio * cap, r.used_tokens)
            prealloc.append(held)
        rows.append((r.used_tokens - held, r.running))
    return rows, prealloc


def dp_rank_count(b: Basis) -> tuple[int | None, str]:
    """The server's DP ranks and where the count comes from: ``dp_size`` of ``server_args``; else the
    highest ``DPn`` tag of a scheduler + 1 (a lower bound: a rank that printed no line is not seen, yet
    a tag ``DP7`` means at least 8); else the schedulers that printed Decode lines. ``(None, "")``
    without Decode lines."""
    seen = len(b.decode_by_sched)
    if not seen:
        return None, ""
    sa = b.rec.server_args.get("dp_size", "")
    if sa.isascii() and sa.isdigit() and 1 <= len(sa) <= 6 and int(sa) >= seen:
        return int(sa), "server_args dp_size"
    tags = [int(dp) for stage, dp in b.rec.states.schedulers if not stage and dp.isascii() and dp.isdigit()]
    if tags and max(tags) + 1 > seen:
        return max(tags) + 1, f"highest DP tag DP{max(tags)} + 1; {seen} printed Decode lines"
    return seen, "schedulers with Decode lines"


def section(b: Basis, model_config: dict | None = None, kv_bytes: float | None = None,
            decode_p99: int | None = None) -> dict:
    """The ``kv_capacity`` section of the report document."""
    f = Figures(DOMAINS)
    cap_tokens = f.set("capacity_tokens", b.capacity_tokens,
                       "no start-up capacity line, no KV Cache is allocated line, and no Decode line with "
                       f"#token and a token usage of at least {ESTIMATE_MIN_USAGE:.2f}")
    f.put("capacity_source", b.capacity_source)
    source = b.capacity_source or ""
    f.set("capacity_estimate_range", b.capacity_range,
          "no capacity" if not source else
          "the lines' bounds disagree (the median of #token / token usage is used)" if source.startswith("estimated")
          else f"not an estimate: the {source} gives the capacity")
    rows, prealloc = _footprints(b)
    running_tokens = sum(u for u, _ in rows)
    mean_tpr = f.set("mean_tokens_per_running_request",
                     kv_tokens_per_request(running_tokens, sum(n for _, n in rows)) if rows else None,
                     "no Decode line with #token and running requests")
    f.put("tokens_per_running_request", distribution([u / n for u, n in rows], (50, 90)))
    f.set("preallocated_tokens_excluded", (sum(prealloc) / len(prealloc)) if prealloc else None,
          "no pre-allocated KV (not a PD decode server)" if not any(r.pd_decode for r in b.decode)
          else "no pre-allocated KV in the Decode lines")
    pools: dict[str, float] = {}
    if cap_tokens and mean_tpr:
        pools["kv"] = capacity_requests(cap_tokens, mean_tpr)
    swa_rows = [r for r in b.decode if r.swa_used is not None and r.running > 0]
    swa = pool_size_estimate([(r.swa_used, r.swa_ratio) for r in swa_rows])
    swa_per_req = ratio(sum(r.swa_used for r in swa_rows), sum(r.running for r in swa_rows))
    if swa and swa_per_req:
        pools["swa"] = swa["size"] / swa_per_req
    mamba = pool_size_estimate([(r.mamba_used, r.mamba_ratio) for r in b.decode if r.mamba_used is not None])
    if mamba:
        pools["mamba"] = round(mamba["size"])  # a whole number of request states
    f.put("capacity_requests_by_pool", pools)
    limiting = min(pools, key=pools.get) if pools else None
    f.put("capacity_limiting_pool", limiting)
    cap_reqs = f.set("capacity_requests", pools[limiting] if limiting else None,
                     "the log has neither the KV capacity nor Decode lines with #token" if cap_tokens is None
                     and mean_tpr is None else
                     f"the KV capacity is n/a: {f.na['capacity_tokens']}" if cap_tokens is None else
                     "no Decode line with #token and running requests" if mean_tpr is None else
                     "the running requests hold no KV tokens in the Decode lines")
    f.set("safety_factor", SAFETY_FACTOR)
    few = (f"fewer than {1 / SAFETY_FACTOR:.2f} requests fit at the observed footprint: no whole request is left at "
           f"the {SAFETY_FACTOR:g} safety factor")
    no_reqs = "the capacity in requests is n/a"
    safe = f.set("safe_ceiling_requests", safe_capacity(cap_reqs),
                 no_reqs if cap_reqs is None else few)
    offline = None
    if safe:
        offline = [max(1, math.floor(cap_reqs * OFFLINE_RANGE[0])), min(safe, math.floor(cap_reqs * OFFLINE_RANGE[1]))]
    offline = f.set("recommended_max_running_requests_offline", offline, no_reqs if cap_reqs is None else few)
    ceiling = f.set("max_running_requests", b.ceiling,
                    "the log has neither the start-up capacity line nor server_args")
    f.set("decode_batch_p99", decode_p99, "no Decode lines")
    # the capacity, the ceilings and the recommendation are those of one scheduler's KV pool
    ranks, ranks_from = dp_rank_count(b)
    ranks = f.set("dp_ranks", ranks, "no Decode lines")
    scope = f.put("capacity_scope", "per DP rank" if ranks and ranks > 1 else "server" if ranks else None)
    kv_model = None
    if model_config is not None:
        per = model_kv_bytes_per_token(model_config, b.tp_size or 1, kv_bytes)
        alloc = b.rec.kv_alloc
        kv_model = dict(per, tp_size=b.tp_size or 1, tp_size_source=b.tp_source or "assumed 1",
                        pool_gib=cap_tokens * per["bytes_per_token"] / 2**30 if cap_tokens else None,
                        log_kv_alloc_tokens=alloc[0] if alloc else None,
                        log_kv_alloc_gib=alloc[1] if alloc else None,
                        log_vs_model_ratio=(ratio(alloc[1], alloc[0] * per["bytes_per_token"] / 2**30)
                                            if alloc else None),
                        bytes_per_request=(per["bytes_per_token"] * mean_tpr) if mean_tpr else None)
    f.put("model", kv_model)
    if cap_reqs is None:
        v = verdict("unknown", f"Capacity in requests: n/a ({f.na['capacity_requests']}).")
    else:
        if limiting == "kv":
            how = (f"{num(cap_tokens)} KV tokens / {num(mean_tpr)} tokens per running request = {num(cap_reqs)} "
                   "requests in theory")
        elif limiting == "mamba":
            how = f"the mamba pool holds {num(cap_reqs)} request states (the token pool: {num(pools.get('kv'))})"
        else:
            how = (f"the SWA pool holds {num(cap_reqs)} requests at {num(swa_per_req)} SWA tokens each "
                   f"(the token pool: {num(pools.get('kv'))})")
        text = how + (f", {safe} at the {SAFETY_FACTOR:g} safety factor." if safe else f"; {few}.")
        if scope == "per DP rank":
            text += (f" These figures are per DP rank (each of the {ranks} DP ranks ({ranks_from}) has its own KV pool): "
                     f"--max-running-requests is the ceiling of each rank's scheduler (with DP attention SGLang "
                     f"divides it among the ranks: {ranks} x the per-rank figure for the server).")
        if ceiling and (not safe or ceiling > safe):
            events = int(b.total("retractions"))
            v = verdict("ceiling_above_safe", text + f" The configured ceiling {ceiling} is above it: the KV pool, "
                        "not the ceiling, decides the batch" + (
                            f", and the log's {plural(events, 'retraction')} followed." if events else
                            ", and retractions follow once the load fills the pool (none in this log)."))
        elif ceiling:
            v = verdict("ceiling_within_safe", text + f" The configured ceiling {ceiling} is within it.")
        else:
            v = verdict("ceiling_unknown", text + " The configured ceiling is not in the log.")
    f.put("verdict", v)
    return f.done()


"""DP ranks: how unevenly the DP ranks of one server were loaded, from their stats lines.

With DP attention every rank runs each step in lockstep and waits for the busiest, so ``max / mean``
across the ranks (:func:`exporter.method.dp_imbalance`, the definition the recording rules use) is the
factor by which the busiest held the others up. The log prints one line stream per rank (``DP<n>``
prefixes). The figures are those the live rules read, sampled at every stats line: each rank's latest
``#running-req``, ``#queue-req`` and KV usage (largest device pool) as the sidecar's gauges hold them,
a rank counting while its latest line is at most :data:`~exporter.limits.DEFAULT_IDLE_AFTER` seconds
old (the sidecar withholds older gauges), at least two ranks at a time.

Figures: ``running_imbalance``, ``queue_imbalance``, ``kv_usage_imbalance`` (distributions of the factor
over the samples; a sample whose ranks are all at 0 has none), ``idle_rank_share`` (share of the ranks
at 0 running, :func:`exporter.method.dp_idle_share`), ``above_threshold_share`` (share of the samples
where the running imbalance exceeds :data:`~exporter.method.DP_IMBALANCE_HIGH` while the ranks average
more than :data:`~exporter.method.DP_IMBALANCE_MIN_RUNNING` running requests: SGLangDPRankImbalance's
condition, without its ``for:``) and ``per_rank`` (lines and mean figures of each rank, side by side).
"""

from __future__ import annotations

from .. import method
from ..limits import DEFAULT_IDLE_AFTER
from .basis import Basis
from .domains import AMOUNT, COUNT, REASONS, SHARE, VERDICT, Dist, Domain, Figures, MapOf, Record, verdict
from .fmt import num, pct
from .stats import distribution

#: max / mean across ranks: 1 (balanced) up to the number of ranks.
FACTOR = Domain("a factor >= 1", low=1.0)

RANK = Record({"lines": COUNT, "running_mean": AMOUNT, "queue_mean": AMOUNT, "kv_usage_mean": SHARE})

DOMAINS = {
    "ranks": COUNT,
    "samples": COUNT,
    "running_imbalance": Dist(FACTOR),
    "queue_imbalance": Dist(FACTOR),
    "kv_usage_imbalance": Dist(FACTOR),
    "idle_rank_share": Dist(SHARE),
    "above_threshold_share": SHARE,
    "per_rank": MapOf(RANK),
    "verdict": VERDICT,
    "not_available": REASONS,
}

#: (figure, index in a rank's latest values)
_FIGURES = (("running_imbalance", 0), ("queue_imbalance", 1), ("kv_usage_imbalance", 2))


def _timeline(b: Basis) -> list[tuple[float, str, tuple]]:
    """Every time-stamped stats line of every rank as ``(t, dp_rank, (running, queue, kv usage))``
    (a value the line lacks is None), in time order, lines of one second in read order."""
    events = []
    for rows_by in (b.decode_by_sched, b.prefill_by_sched):
        for dp, rows in rows_by.items():
            events += [(r.t, r.seq, dp, (r.running, r.queue, r.kv_ratio)) for r in rows if r.t is not None]
    events.sort(key=lambda e: e[:2])  # time, then read order within one second
    return [(t, dp, values) for t, _, dp, values in events]


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def section(b: Basis) -> dict:
    """The ``dp_balance`` section of the report document."""
    f = Figures(DOMAINS)
    ranks = sorted(set(b.decode_by_sched) | set(b.prefill_by_sched), key=lambda dp: (len(dp), dp))
    f.set("ranks", len(ranks))
    per_rank = {}
    for dp in ranks:
        rows = b.decode_by_sched.get(dp, []) + b.prefill_by_sched.get(dp, [])
        per_rank[dp] = {
            "lines": len(rows),
            "running_mean": _mean([r.running for r in rows if r.running is not None]),
            "queue_mean": _mean([r.queue for r in rows if r.queue is not None]),
            "kv_usage_mean": _mean([r.kv_ratio for r in rows if r.kv_ratio is not None]),
        }
    f.put("per_rank", per_rank)
    single = ("one DP rank in the log: nothing to compare across ranks" if len(ranks) == 1 else
              "no Prefill/Decode lines" if not ranks else None)
    events = _timeline(b) if not single else []
    why = single or (None if events else b.no_time)
    latest: dict[str, tuple[float, tuple]] = {}
    series: dict[str, list[float]] = {name: [] for name, _ in _FIGURES}
    idle, above, samples = [], 0, 0
    for t, dp, values in events:
        prev = latest.get(dp, (t, (None, None, None)))[1]
        latest[dp] = (t, tuple(v if v is not None else p for v, p in zip(values, prev)))
        fresh = [v for seen, v in latest.values() if t - seen <= DEFAULT_IDLE_AFTER]
        if len(fresh) < 2:
            continue
        samples += 1
        for name, i in _FIGURES:
            per = [v[i] for v in fresh if v[i] is not None]
            ratio = method.dp_imbalance(per) if len(per) == len(fresh) else None
            if ratio is not None:
                series[name].append(ratio)
        running = [v[0] for v in fresh]
        if None not in running:
            idle.append(method.dp_idle_share(running))
            above += method.dp_imbalance_high(running)
    if not why and not samples:
        why = (f"no two ranks printed a stats line within {DEFAULT_IDLE_AFTER:g} s of each other "
               "(the sidecar withholds older gauges)")
    f.set("samples", samples if not why else None, why)
    for name, what in (("running_imbalance", "running requests"), ("queue_imbalance", "queue"),
                       ("kv_usage_imbalance", "KV usage")):
        d = distribution(series[name], (50, 90))
        f.set(name, d if d["count"] else None, why or f"every rank's {what} was 0 at every sample: no max / mean")
    d = distribution(idle, (50, 90))
    f.set("idle_rank_share", d if d["count"] else None, why or "no sample with every rank's #running-req")
    f.set("above_threshold_share", above / len(idle) if idle else None,
          why or "no sample with every rank's #running-req")
    run = f.values["running_imbalance"]
    p90 = num(run["p90"], 2) if run else "n/a"
    if why:
        v = verdict("unknown", f"DP-rank imbalance n/a: {why}.")
    elif f.values["above_threshold_share"]:
        v = verdict("imbalanced", f"The busiest DP rank ran more than {method.DP_IMBALANCE_HIGH:g} x the ranks' mean "
                    f"requests (with more than {method.DP_IMBALANCE_MIN_RUNNING} per rank) in "
                    f"{pct(f.values['above_threshold_share'])} of the samples (running imbalance p90 {p90}): the others padded their steps while waiting. Check "
                    "--load-balance-method and how requests are routed.")
    else:
        v = verdict("balanced", f"No sample had the busiest DP rank above {method.DP_IMBALANCE_HIGH:g} x the ranks' "
                    f"mean with more than {method.DP_IMBALANCE_MIN_RUNNING} running requests per rank "
                    "(SGLangDPRankImbalance's condition)" + (f"; running imbalance p90 {p90} over all samples, light "
                                                             "load included." if run else "."))
    f.put("verdict", v)
    return f.done()

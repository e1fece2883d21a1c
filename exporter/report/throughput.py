"""Checklist: is the throughput real? Computed, recomputed and useful tokens ("fake throughput").

Figures: ``prefill_computed_tokens`` / ``prefill_cached_tokens`` (sums of ``#new-token`` /
``#cached-token``: exact); ``decode_tokens`` = ``#running-req`` x decode-log interval x ``accept len``
per Decode line (an estimate: the batch is sampled once per interval); ``recomputed_tokens``:
``#new_tokens_gained`` of retraction lines (KV slots freed and never cached: a lower bound, since what
stayed cached and is evicted before re-admission is computed again too), else retracted requests x KV
tokens per running request of the latest Decode line (estimated); ``useful`` = computed -
recomputed; ``recompute_share`` = recomputed / computed. Rates divide by the active seconds of the
stats lines (idle gaps capped, see :mod:`exporter.report.basis`).
"""

from __future__ import annotations

from .basis import Basis
from .classes import unseen_preemptions
from .domains import AMOUNT, COUNT, LABEL, REASONS, SHARE, VERDICT, Dist, Figures, verdict
from .fmt import num, pct
from .. import method
from .stats import distribution, plural, ratio

DOMAINS = {
    "prefill_computed_tokens": COUNT,
    "prefill_cached_tokens": COUNT,
    "decode_tokens": AMOUNT,
    "computed_tokens": AMOUNT,
    "recomputed_tokens": AMOUNT,
    "recomputed_tokens_method": LABEL,
    "decode_tokens_basis": LABEL,
    "retractions_not_sized": COUNT,
    "useful_tokens": AMOUNT,
    "recompute_share": SHARE,
    "cache_hit_ratio": SHARE,
    "seconds": AMOUNT,
    "computed_tokens_per_second": AMOUNT,
    "useful_tokens_per_second": AMOUNT,
    "sglang_gen_throughput": Dist(AMOUNT),
    "verdict": VERDICT,
    "not_available": REASONS,
}


def seconds_reason(b: Basis) -> str | None:
    """Why rates over the stats lines cannot be given, or ``None`` when they can."""
    if b.active_seconds is None:
        return "no time-stamped Prefill/Decode lines" if (b.decode or b.prefill) else "no Prefill/Decode lines"
    if b.active_seconds == 0:
        return "the Prefill/Decode lines lie within one second (1-s time stamps cannot time them)"
    return None


def decode_basis(b: Basis) -> str:
    """What the decode tokens (and every rate built on them) rest on: the Decode lines times the
    decode-log interval, and where that interval came from; an assumed one says so."""
    steps = (f"{b.interval} steps" if b.total("decode_steps") == b.total("decode_lines") * b.interval else
             f"the steps of the interval in effect at each line (the starts differ; the latest {b.interval})")
    if b.interval_source == "default":
        return (f"estimated: Decode lines x {steps}, an ASSUMED interval, SGLang's default: "
                "the log does not give it")
    return f"estimated: Decode lines x {steps}, the interval from {b.interval_source}"


def section(b: Basis) -> dict:
    """The ``throughput`` section of the report document."""
    f = Figures(DOMAINS)
    p_comp = f.set("prefill_computed_tokens", int(b.total("prefill_computed_tokens")))
    p_cached = f.set("prefill_cached_tokens", int(b.total("prefill_cached_tokens")))
    d_tok = f.set("decode_tokens", b.total("decode_tokens"))
    f.put("decode_tokens_basis", decode_basis(b) if b.decode else None)
    gained = b.total("recomputed_tokens_gained")
    estimated = b.total("recomputed_tokens_estimated")
    recomputed = f.set("recomputed_tokens", gained + estimated)
    computed = f.set("computed_tokens", p_comp + d_tok)
    f.put("recomputed_tokens_method", "new_tokens_gained" if gained and not estimated else
          "estimated" if estimated and not gained else "mixed" if recomputed else None)
    f.set("retractions_not_sized", b.rec.unestimated_retractions)
    before_log = (f"the retracted requests' work started before this log: their recompute "
                  f"({num(recomputed)} tokens) exceeds the work the log shows ({num(computed)} tokens)")
    unseen = unseen_preemptions(b)
    if unseen:
        f.put("recomputed_tokens_method", "retraction lines only (priority preemptions cannot be seen)")
    useful = f.set("useful_tokens", None if unseen else method.useful_tokens(computed, recomputed),
                   unseen or before_log)
    rshare = f.set("recompute_share", None if unseen else method.recompute_share(recomputed, computed),
                   "nothing computed in the log: no Prefill/Decode lines" if not computed else unseen or before_log)
    f.set("cache_hit_ratio", ratio(p_cached, p_cached + p_comp),
          "no Prefill lines" if not b.prefill else "the Prefill lines computed no prompt tokens")
    why = seconds_reason(b)
    seconds = f.set("seconds", b.active_seconds, why)
    f.set("computed_tokens_per_second", ratio(computed, seconds), why)
    f.set("useful_tokens_per_second", ratio(useful, seconds), why or f.na.get("useful_tokens"))
    f.put("sglang_gen_throughput", distribution([r.gen_throughput for r in b.decode if r.gen_throughput is not None],
                                                (50,)))
    retractions = b.total("retractions")
    if not computed:
        v = verdict("unknown", "No Prefill/Decode lines: nothing computed in the log."
                    + (f" {plural(b.rec.unestimated_retractions, 'retraction')} whose recompute cannot be sized."
                       if b.rec.unestimated_retractions else ""))
    elif unseen:
        v = verdict("unknown_recompute", f"The recomputed share of the throughput cannot be given: {unseen}"
                    + (f"; the {plural(retractions, 'retraction')} of the log recomputed {num(recomputed)} tokens."
                       if retractions else "."))
    elif retractions and not recomputed:
        v = verdict("unknown_recompute", f"{plural(retractions, 'retraction')}, but their recompute cannot be "
                    "sized (no #new_tokens_gained and no Decode line before them): the throughput includes an "
                    "unknown share of recomputed work.")
    elif rshare is None:
        v = verdict("unknown_recompute", f"The recompute share cannot be given: {before_log}.")
    elif rshare > method.RECOMPUTE_SHARE_HIGH:
        v = verdict("fake_throughput", f"{pct(rshare)} of computed tokens are recompute ({num(recomputed)} of "
                    f"{num(computed)}): " + (f"a tokens/s figure over computed work overstates useful work by "
                                            f"{pct(method.overstatement(rshare))}." if useful else
                                            "no computed token was useful work."))
    elif rshare and gained:
        v = verdict("recompute_at_least", f"At least {pct(rshare)} of computed tokens are recompute ({num(recomputed)} "
                    f"of {num(computed)}): #new_tokens_gained is a lower bound (KV still cached at a retraction and "
                    "evicted before re-admission is computed again too: with chunked prompts the recompute can be "
                    "several times it), so this does not show the share is small; the per-pass stream's "
                    "sglang_scheduler_forward_pass_retracted_tokens_total gives the upper bound.")
    elif rshare:
        v = verdict("minor_recompute", f"{pct(rshare)} of computed tokens are recompute: small.")
    else:
        v = verdict("real", "No recomputed tokens: computed throughput is useful throughput.")
    f.put("verdict", v)
    return f.done()

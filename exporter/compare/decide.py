"""The knee and the two choices of the method, each said in one sentence with the figures that decide it.

* **Throughput knee** (:data:`KNEE_GAIN`): going up the swept setting, the knee is the last setting before the
  first step where useful tokens/s rises by less than ``KNEE_GAIN`` per doubling of the setting
  (``(u2 / u1) ** (1 / log2(x2 / x1)) - 1``) while P99 TTFT or the retraction share of batches rises.
* **Latency knee**: going up the swept setting, the last setting before the first step where the
  client's P99 TTFT grows by a larger factor than useful tokens/s (``t2 / t1 > u2 / u1``: latency
  climbs faster than throughput), the TTFT rise being outside the repeats' noise.
* **Online choice**: among the settings whose P99 TTFT (the client's) meets ``--ttft-slo`` (and P99
  TPOT ``--tpot-slo`` when given), the one with the most useful tokens/s (on a tie the lower P99
  TTFT): never a setting that another has beaten on both (:func:`pareto`).
* **Offline choice**: the setting with the most useful tokens/s whose retractions stay under
  :data:`~exporter.report.retractions.RETRACTION_RULE` (5%) of batches.

Figures are the groups' medians. How sure: "single run, noise unknown" when a deciding setting has one
run; else whether the deciding difference lies within the repeats' spread (noise) or outside it.
"""

from __future__ import annotations

import math

from ..report.retractions import RETRACTION_RULE
from .sweep import within_noise

#: Useful-throughput gain per doubling of the swept setting below which it "stops rising".
KNEE_GAIN = 0.05

USEFUL, TTFT, RETR = "useful_tokens_per_second", "p99_ttft_ms", "retraction_share_of_batches"
TPOT = "p99_tpot_ms"


def _med(g: dict, key: str) -> float | None:
    return g["figures"][key]["median"]


def _f(x: float | None, digits: int = 1, unit: str = "") -> str:
    return "n/a" if x is None else f"{x:,.{digits}f}{unit}"


def _ms(x: float | None) -> str:
    """Milliseconds as ``"850 ms"``, from 10 s on as ``"12.3 s"``."""
    return "n/a" if x is None else f"{x:,.0f} ms" if x < 10000 else f"{x / 1000:,.1f} s"


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.2f}%"


def _at(swept: str | None, g: dict) -> str:
    return f"{swept}={g['value']}" if swept else "the runs' one setting"


def _sure(*gs: dict, key: str = USEFUL) -> str:
    if any(g["figures"][key]["n"] < 2 for g in gs):
        return "single run, noise unknown"
    ns = sorted({g["figures"][key]["n"] for g in gs})
    return f"{ns[0]} runs per setting" if len(ns) == 1 else f"{ns[0]}-{ns[-1]} runs per setting"


def steps(groups: list[dict], swept: str | None) -> list[dict]:
    """One row per pair of neighbouring settings: gain per doubling of useful tokens/s, whether P99
    TTFT and the retraction share rose, and whether each difference is noise (:func:`within_noise`)."""
    out = []
    for a, b in zip(groups, groups[1:]):
        u1, u2 = _med(a, USEFUL), _med(b, USEFUL)
        x1, x2 = a["number"], b["number"]
        gain = None
        if None not in (u1, u2, x1, x2) and u1 > 0 and x1 > 0 and x2 > x1:
            gain = (u2 / u1) ** (1 / math.log2(x2 / x1)) - 1
        rises = {}
        for key in (TTFT, RETR):
            v1, v2 = _med(a, key), _med(b, key)
            rises[key] = None if v1 is None or v2 is None else v2 > v1 and within_noise(
                a["figures"][key], b["figures"][key]) is not True
        out.append({"from": a["value"], "to": b["value"], "useful_gain_per_doubling": gain,
                    "useful_within_noise": within_noise(a["figures"][USEFUL], b["figures"][USEFUL]),
                    "p99_ttft_rises": rises[TTFT], "retraction_share_rises": rises[RETR]})
    return out


def knee(groups: list[dict], step_rows: list[dict], swept: str | None) -> dict:
    """``{"value", "text", "sure"}``: the knee setting (``None`` when there is none in the range)."""
    if len(groups) < 2 or swept is None:
        return {"value": None, "text": "No throughput knee: the runs do not sweep a setting (one setting only).",
                "sure": None}
    for i, s in enumerate(step_rows):
        if s["useful_gain_per_doubling"] is None:
            continue
        flat = s["useful_gain_per_doubling"] < KNEE_GAIN or s["useful_within_noise"] is True
        if flat and (s["p99_ttft_rises"] or s["retraction_share_rises"]):
            a, b = groups[i], groups[i + 1]
            why = []
            if s["p99_ttft_rises"]:
                why.append(f"P99 TTFT rises from {_ms(_med(a, TTFT))} to {_ms(_med(b, TTFT))}")
            if s["retraction_share_rises"]:
                why.append(f"retractions from {_pct(_med(a, RETR))} to {_pct(_med(b, RETR))} of batches")
            sure = _sure(a, b)
            if s["useful_within_noise"]:
                sure += "; the throughput difference lies within the repeats' spread (noise)"
            return {"value": a["value"], "sure": sure,
                    "text": (f"Throughput knee at {swept}={a['value']}: going to {b['value']}, useful throughput changes "
                             f"{100 * s['useful_gain_per_doubling']:+.1f}% per doubling "
                             f"({_f(_med(a, USEFUL))} -> {_f(_med(b, USEFUL))} tok/s, under "
                             f"{100 * KNEE_GAIN:.0f}%) while " + " and ".join(why) + f" ({sure}).")}
    last = groups[-1]
    return {"value": None, "sure": _sure(*groups),
            "text": (f"No throughput knee in the swept range: useful throughput still rises by {100 * KNEE_GAIN:.0f}% or more "
                     f"per doubling, or neither P99 TTFT nor retractions rise, up to {swept}={last['value']} "
                     f"({_f(_med(last, USEFUL))} tok/s; {_sure(*groups)}).")}


def latency_knee(groups: list[dict], swept: str | None) -> dict:
    """``{"value", "text", "sure"}``: the latency knee (module docstring), ``None`` when there is none."""
    if len(groups) < 2 or swept is None:
        return {"value": None, "sure": None,
                "text": "No latency knee: the runs do not sweep a setting (one setting only)."}
    known = [g for g in groups if _med(g, TTFT) is not None and _med(g, USEFUL) is not None]
    if len(known) < 2:
        return {"value": None, "sure": None,
                "text": "No latency knee: fewer than two settings have both P99 TTFT and useful throughput."}
    for a, b in zip(known, known[1:]):
        t1, t2, u1, u2 = _med(a, TTFT), _med(b, TTFT), _med(a, USEFUL), _med(b, USEFUL)
        if t1 <= 0 or u1 <= 0 or t2 <= t1 or within_noise(a["figures"][TTFT], b["figures"][TTFT]) is True:
            continue
        if t2 / t1 > u2 / u1:
            sure = _sure(a, b, key=TTFT)
            return {"value": a["value"], "sure": sure,
                    "text": (f"Latency knee at {swept}={a['value']}: going to {b['value']}, P99 TTFT grows "
                             f"x{t2 / t1:.2f} ({_ms(t1)} -> {_ms(t2)}) while useful throughput grows only "
                             f"x{u2 / u1:.2f} ({_f(u1)} -> {_f(u2)} tok/s) ({sure}).")}
    last = known[-1]
    return {"value": None, "sure": _sure(*known, key=TTFT),
            "text": (f"No latency knee in the swept range: P99 TTFT never grows by a larger factor than useful "
                     f"throughput, up to {swept}={last['value']} ({_ms(_med(last, TTFT))}, "
                     f"{_f(_med(last, USEFUL))} tok/s; {_sure(*known, key=TTFT)}).")}


def pareto(groups: list[dict]) -> list[str | None]:
    """The values of the settings on the front of useful tokens/s (higher is better) against P99 TTFT
    (lower is better): those that no other setting matches on both and beats on one. Settings missing
    either figure are left out."""
    known = [g for g in groups if _med(g, TTFT) is not None and _med(g, USEFUL) is not None]

    def beaten(g: dict) -> bool:
        return any(_med(h, USEFUL) >= _med(g, USEFUL) and _med(h, TTFT) <= _med(g, TTFT)
                   and (_med(h, USEFUL) > _med(g, USEFUL) or _med(h, TTFT) < _med(g, TTFT)) for h in known)
    return [g["value"] for g in known if not beaten(g)]


def online(groups: list[dict], swept: str | None, slo: float | None, tpot_slo: float | None = None) -> dict:
    """``{"value", "text", "sure"}``: the most useful tokens/s among the settings whose P99 TTFT meets
    ``slo`` seconds (and P99 TPOT ``tpot_slo`` seconds when given); ties go to the lower P99 TTFT."""
    if slo is None:
        return {"value": None, "sure": None, "text": "Online choice: n/a (give --ttft-slo SECONDS)."}
    known = [g for g in groups if _med(g, TTFT) is not None and (tpot_slo is None or _med(g, TPOT) is not None)]
    if not known:
        key = TTFT if all(_med(g, TTFT) is None for g in groups) else TPOT
        why = groups[0]["figures"][key]["reason"] if groups else "no runs"
        label = "P99 TTFT" if key == TTFT else "P99 TPOT"
        return {"value": None, "sure": None, "text": f"Online choice: n/a (no {label}: {why})."}
    target = f"the P99 TTFT target of {slo:g} s" + (f" and P99 TPOT target of {1000 * tpot_slo:g} ms"
                                                      if tpot_slo is not None else "")
    meets = [g for g in known if _med(g, TTFT) <= 1000 * slo
             and (tpot_slo is None or _med(g, TPOT) <= 1000 * tpot_slo)]
    if not meets:
        best = min(known, key=lambda g: _med(g, TTFT))
        return {"value": None, "sure": _sure(best, key=TTFT),
                "text": (f"Online choice: none; no setting meets {target} (the lowest P99 TTFT, "
                         f"{_ms(_med(best, TTFT))} at {_at(swept, best)}; {_sure(best, key=TTFT)}).")}
    rated = [g for g in meets if _med(g, USEFUL) is not None]
    if not rated:
        g = min(meets, key=lambda h: _med(h, TTFT))
        sure = _sure(g, key=TTFT)
        return {"value": g["value"], "sure": sure,
                "text": (f"Online choice: {_at(swept, g)}, the lowest P99 TTFT ({_ms(_med(g, TTFT))}) meeting "
                         f"{target}; useful throughput n/a for every setting that meets it ({sure}).")}
    g = min(rated, key=lambda h: (-_med(h, USEFUL), _med(h, TTFT)))
    sure = _sure(g)
    ties = [h for h in rated if h is not g and within_noise(g["figures"][USEFUL], h["figures"][USEFUL])]
    if ties:
        sure += "; within noise of " + ", ".join(f"{swept}={h['value']}" for h in ties)
    others = [h for h in rated if h is not g]
    beside = ("; " + ", ".join(f"{swept}={h['value']} {_f(_med(h, USEFUL))} tok/s at {_ms(_med(h, TTFT))}"
                               for h in others)) if others and swept else ""
    return {"value": g["value"], "sure": sure,
            "text": (f"Online choice: {_at(swept, g)}, the most useful throughput ({_f(_med(g, USEFUL))} tok/s, "
                     f"P99 TTFT {_ms(_med(g, TTFT))}) among the settings that meet {target}{beside} ({sure}).")}


def offline(groups: list[dict], swept: str | None) -> dict:
    """``{"value", "text", "sure"}``: the most useful tokens/s with retractions under 5% of batches."""
    ok = [g for g in groups if _med(g, USEFUL) is not None and _med(g, RETR) is not None
          and _med(g, RETR) < RETRACTION_RULE]
    if not ok:
        return {"value": None, "sure": None,
                "text": (f"Offline choice: none; no setting has both useful throughput and retractions under "
                         f"{100 * RETRACTION_RULE:.0f}% of batches.")}
    g = max(ok, key=lambda h: _med(h, USEFUL))
    sure = _sure(g)
    ties = [h for h in ok if h is not g and within_noise(g["figures"][USEFUL], h["figures"][USEFUL])]
    if ties:
        sure += "; within noise of " + ", ".join(f"{swept}={h['value']}" for h in ties)
    return {"value": g["value"], "sure": sure,
            "text": (f"Offline choice: {_at(swept, g)}, the most useful throughput "
                     f"({_f(_med(g, USEFUL))} tok/s) with retractions at {_pct(_med(g, RETR))} of batches, under "
                     f"{100 * RETRACTION_RULE:.0f}% ({sure}).")}

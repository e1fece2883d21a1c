"""The knee and the two choices of the method, each said in one sentence with the figures that decide it.

* **Knee** (:data:`KNEE_GAIN`): going up the swept setting, the knee is the last setting before the
  first step where useful tokens/s rises by less than ``KNEE_GAIN`` per doubling of the setting
  (``(u2 / u1) ** (1 / log2(x2 / x1)) - 1``) while P99 TTFT or the retraction share of batches rises.
* **Online choice**: the largest setting whose P99 TTFT (the client's) meets ``--ttft-slo``.
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
        return {"value": None, "text": "No knee: the runs do not sweep a setting (one setting only).", "sure": None}
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
                    "text": (f"Knee at {swept}={a['value']}: going to {b['value']}, useful throughput changes "
                             f"{100 * s['useful_gain_per_doubling']:+.1f}% per doubling "
                             f"({_f(_med(a, USEFUL))} -> {_f(_med(b, USEFUL))} tok/s, under "
                             f"{100 * KNEE_GAIN:.0f}%) while " + " and ".join(why) + f" ({sure}).")}
    last = groups[-1]
    return {"value": None, "sure": _sure(*groups),
            "text": (f"No knee in the swept range: useful throughput still rises by {100 * KNEE_GAIN:.0f}% or more "
                     f"per doubling, or neither P99 TTFT nor retractions rise, up to {swept}={last['value']} "
                     f"({_f(_med(last, USEFUL))} tok/s; {_sure(*groups)}).")}


def online(groups: list[dict], swept: str | None, slo: float | None) -> dict:
    """``{"value", "text", "sure"}``: the largest setting whose P99 TTFT meets ``slo`` seconds."""
    if slo is None:
        return {"value": None, "sure": None, "text": "Online choice: n/a (give --ttft-slo SECONDS)."}
    known = [g for g in groups if _med(g, TTFT) is not None]
    if not known:
        why = groups[0]["figures"][TTFT]["reason"] if groups else "no runs"
        return {"value": None, "sure": None, "text": f"Online choice: n/a (no P99 TTFT: {why})."}
    meets = [g for g in known if _med(g, TTFT) <= 1000 * slo]
    if not meets:
        best = min(known, key=lambda g: _med(g, TTFT))
        return {"value": None, "sure": _sure(best, key=TTFT),
                "text": (f"Online choice: none; no setting meets the P99 TTFT target of {slo:g} s (the lowest, "
                         f"{_ms(_med(best, TTFT))} at {_at(swept, best)}; {_sure(best, key=TTFT)}).")}
    g = meets[-1]
    above = [h for h in known if h["number"] is not None and g["number"] is not None and h["number"] > g["number"]]
    nxt = f"; {swept}={above[0]['value']} has {_ms(_med(above[0], TTFT))}" if above else ""
    sure = _sure(g, key=TTFT)
    return {"value": g["value"], "sure": sure,
            "text": (f"Online choice: {_at(swept, g)}, the largest setting whose P99 TTFT "
                     f"{_ms(_med(g, TTFT))} meets the {slo:g} s target{nxt} ({sure}).")}


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

"""The traffic model in words: periods, the active arrival rate, windows and burstiness, lengths."""

from __future__ import annotations

from datetime import datetime, timezone


def _t(x: float | None) -> str:
    return "n/a" if x is None else datetime.fromtimestamp(x, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _n(x: float | None, digits: int = 0) -> str:
    if x is None:
        return "n/a"
    return f"{x:,.{digits}f}" if x == x and abs(x) != float("inf") else "inf"


def lengths_table(doc: dict) -> list[str]:
    """The input and output length rows (tokens)."""
    out = [f"{'tokens':<8} {'count':>7} {'mean':>9} {'variance':>11} {'CV':>5} {'p50':>7} {'p90':>7} {'p99':>7} {'max':>7}"]
    for key, label in (("input_tokens", "input"), ("output_tokens", "output")):
        d = doc[key]
        out.append(f"{label:<8} {d['count']:>7,} {_n(d['mean'], 1):>9} {_n(d['variance'], 0):>11} {_n(d['cv'], 2):>5} "
                   f"{_n(d['p50']):>7} {_n(d['p90']):>7} {_n(d['p99']):>7} {_n(d['max']):>7}")
    if doc.get("source") == "histograms":
        out.append("(from SGLang's histograms: percentiles are their bucket's upper bound, the variance is unknown)")
    return out


def text(doc: dict) -> str:
    """The traffic document (:func:`exporter.traffic.cli.build_document`) as plain text."""
    out = [f"Traffic model from {doc['source_text']}", ""]
    a = doc.get("arrivals")
    if a:
        act = a["active"]
        out += [f"Arrivals: {a['requests']:,} requests from {_t(a['first'])} to {_t(a['last'])}; periods cut at "
                f"idle gaps over {a['idle_gap_seconds']:.1f} s:",
                f"  {'#':>3} {'start':<23} {'requests':>8} {'span s':>9} {'rate /s':>8}"]
        for i, p in enumerate(a["periods"], 1):
            out.append(f"  {i:>3} {_t(p['start']):<23} {p['requests']:>8,} {p['span_seconds']:>9.1f} "
                       f"{_n(p['rate_per_second'], 2):>8}")
        w = a["windows"]
        out += ["", f"Active arrival rate: {_n(act['rate_per_second'], 3)} requests/s ({act['requests']:,} requests "
                    f"in {act['seconds']:,.1f} s of periods with two or more; idle time left out)",
                f"Per {w['seconds']:g}-s window: mean {_n(w['mean_rate_per_second'], 3)}/s, peak "
                f"{_n(w['peak_rate_per_second'], 3)}/s at {_t(w['peak_start'])} ({w['count']} windows)",
                f"Burstiness: dispersion index of window counts {_n(w['dispersion_index'], 2)}, CV of gaps between "
                f"arrivals {_n(a['interarrival_cv'], 2)} (a Poisson process of the same mean: 1 and 1; more is burstier)"]
    else:
        out += [f"Arrivals: n/a ({doc['arrivals_reason']})"]
    out += ["", "Request lengths:"] + ["  " + x for x in lengths_table(doc)]
    if doc.get("trace"):
        t = doc["trace"]
        out += ["", f"Trace: {t['requests']:,} requests ({t['kind']}) written to {t['path']}; replay it with "
                    f"python -m sglang.benchmark.serving --backend sglang --dataset-name mooncake --dataset-path "
                    f"{t['path']}"]
    out += [""] + [f"warning: {w}" for w in doc["warnings"]] if doc["warnings"] else []
    return "\n".join(out) + "\n"

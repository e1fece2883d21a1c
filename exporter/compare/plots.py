"""The comparison's two PNG plots against the swept setting (matplotlib, the report's optional dependency).

``throughput``: useful and computed tokens/s (groups' medians, bars from min to max over repeats);
``latency``: the client's P99 TTFT (left axis) and the retraction share of batches (right axis, with
the 5% rule). The x axis is log2 when the swept values are positive numbers, else the values in order.
``pareto``: useful tokens/s against the client's P99 TTFT, one point per setting (labelled with its
value), the front of :func:`exporter.compare.decide.pareto` drawn as a line and the online choice ringed.
"""

from __future__ import annotations

import io
import os

from ..report.plots import have_matplotlib


def _series(doc: dict, key: str) -> tuple[list, list, list]:
    ys, lo, hi = [], [], []
    for g in doc["groups"]:
        f = g["figures"][key]
        m = f["median"]
        ys.append(float("nan") if m is None else m)
        lo.append(0 if m is None else m - f["min"])
        hi.append(0 if m is None else f["max"] - m)
    return ys, lo, hi


def make_plots(doc: dict, directory: str | None = None) -> dict[str, bytes]:
    """``{"throughput": png, "latency": png, "pareto": png}`` (``pareto`` when two settings have both
    useful tokens/s and P99 TTFT); empty without matplotlib or with fewer than two settings.
    With ``directory``, also written there as ``compare-<name>.png``.

    Raises:
        OSError: the directory cannot be created or written.
    """
    groups = doc["groups"]
    if not have_matplotlib() or len(groups) < 2:
        return {}
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    numeric = all(g["number"] is not None and g["number"] > 0 for g in groups)
    xs = [g["number"] for g in groups] if numeric else list(range(len(groups)))
    swept = doc["swept"] or "setting"
    out = {}

    def axes_x(ax):
        if numeric:
            ax.set_xscale("log", base=2)
        ax.set_xticks(xs)
        ax.set_xticklabels([str(g["value"]) for g in groups])
        ax.set_xlabel(swept)
        ax.grid(alpha=0.3)

    fig, ax = plt.subplots(figsize=(7, 3.4), dpi=100)
    for key, label, color in (("useful_tokens_per_second", "useful tokens/s", "#2ca02c"),
                              ("computed_tokens_per_second", "computed tokens/s", "#1f77b4")):
        ys, lo, hi = _series(doc, key)
        ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", capsize=3, label=label, color=color)
    if doc["knee"]["value"] is not None:
        kx = next(x for x, g in zip(xs, groups) if g["value"] == doc["knee"]["value"])
        ax.axvline(kx, color="#d62728", linestyle="--", label=f"knee {doc['knee']['value']}")
    ax.set_ylabel("tokens/s (estimated)")
    ax.set_title("Throughput against " + swept)
    ax.legend(fontsize=8)
    axes_x(ax)
    out["throughput"] = _png(fig)

    fig, ax = plt.subplots(figsize=(7, 3.4), dpi=100)
    ys, lo, hi = _series(doc, "p99_ttft_ms")
    ax.errorbar(xs, [y / 1000 for y in ys], yerr=[[v / 1000 for v in lo], [v / 1000 for v in hi]], marker="o",
                capsize=3, color="#ff7f0e", label="P99 TTFT (client)")
    if doc["rules"]["ttft_slo_seconds"] is not None:
        ax.axhline(doc["rules"]["ttft_slo_seconds"], color="#ff7f0e", linestyle=":", label="TTFT target")
    ax.set_ylabel("P99 TTFT (s)")
    ax.set_ylim(bottom=0)
    axes_x(ax)
    ax2 = ax.twinx()
    ys, lo, hi = _series(doc, "retraction_share_of_batches")
    ax2.errorbar(xs, [100 * y for y in ys], yerr=[[100 * v for v in lo], [100 * v for v in hi]], marker="s",
                 capsize=3, color="#d62728", label="retractions (% of batches)")
    ax2.axhline(100 * doc["rules"]["retraction_rule"], color="#d62728", linestyle="--", alpha=0.5, label="5% rule")
    ax2.set_ylabel("retractions (% of batches)")
    ax2.set_ylim(bottom=0)
    lines = ax.get_legend_handles_labels()
    lines2 = ax2.get_legend_handles_labels()
    ax.legend(lines[0] + lines2[0], lines[1] + lines2[1], fontsize=8, loc="lower left")
    ax.set_title("P99 TTFT and retractions against " + swept)
    out["latency"] = _png(fig)
    pareto = _pareto(doc)
    if pareto is not None:
        out["pareto"] = pareto
    if directory:
        os.makedirs(directory, exist_ok=True)
    for name, data in out.items() if directory else ():
        with open(os.path.join(directory, f"compare-{name}.png"), "wb") as f:
            f.write(data)
    return out


def _pareto(doc: dict) -> bytes | None:
    """The Pareto plot as PNG bytes; ``None`` when fewer than two settings have both figures."""
    import matplotlib.pyplot as plt

    points = [(g["figures"]["p99_ttft_ms"]["median"] / 1000, g["figures"]["useful_tokens_per_second"]["median"], g)
              for g in doc["groups"] if g["figures"]["p99_ttft_ms"]["median"] is not None
              and g["figures"]["useful_tokens_per_second"]["median"] is not None]
    if len(points) < 2:
        return None
    fig, ax = plt.subplots(figsize=(7, 3.4), dpi=100)
    ax.scatter([p[0] for p in points], [p[1] for p in points], color="#1f77b4", zorder=3, label="setting")
    for x, y, g in points:
        ax.annotate(str(g["value"]), (x, y), textcoords="offset points", xytext=(5, 4), fontsize=8)
    front = sorted((p for p in points if p[2]["value"] in doc["pareto"]), key=lambda p: p[0])
    ax.plot([p[0] for p in front], [p[1] for p in front], color="#2ca02c", linestyle="-", marker="o",
            label="Pareto front")
    chosen = [p for p in points if p[2]["value"] == doc["online"]["value"]]
    if chosen:
        ax.scatter([chosen[0][0]], [chosen[0][1]], s=200, facecolors="none", edgecolors="#d62728", linewidths=2,
                   zorder=4, label=f"online choice {chosen[0][2]['value']}")
    if doc["rules"]["ttft_slo_seconds"] is not None:
        ax.axvline(doc["rules"]["ttft_slo_seconds"], color="#ff7f0e", linestyle=":", label="TTFT target")
    ax.set_xlabel("P99 TTFT (s, client)")
    ax.set_ylabel("useful tokens/s (estimated)")
    ax.set_title("Useful throughput against P99 TTFT, one point per " + (doc["swept"] or "setting"))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _png(fig)


def _png(fig) -> bytes:
    """The figure as PNG bytes; the figure is closed."""
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()

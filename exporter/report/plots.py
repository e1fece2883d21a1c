"""PNG plots of a report with matplotlib (an optional dependency: extra ``report``)."""

from __future__ import annotations

import io
import os

from .baseline import BASELINE_SCHEMA


def have_matplotlib() -> bool:
    """True when matplotlib can be imported."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


#: What a page without plots says instead, and ``report`` prints on stderr, when matplotlib is missing.
NO_MATPLOTLIB = ("no plots: matplotlib is not installed (pip install 'sglang-exporter[report]'; in a clone: "
                 ".venv/bin/pip install -e '.[report]')")


def missing_reason(doc: dict) -> str | None:
    """Why a single run's document (or one SGLang Omni stage's) gets no plots, or ``None`` when it
    gets them: matplotlib missing, or no time-stamped Decode line to draw."""
    if not have_matplotlib():
        return NO_MATPLOTLIB
    if not doc["timeline"]["decode"]:
        return "no plots: the log has no time-stamped Decode batch line to draw"
    return None


def make_plots(doc: dict, directory: str | None = None) -> dict[str, bytes]:
    """PNG plots of the run (the current run in baseline mode): ``{name: png_bytes}``.

    ``batch_queue``: decode batch size and queue depth over time with the ceiling; ``kv_usage``: KV
    usage over time with retractions marked; ``batch_hist``: the decode batch-size distribution.
    Empty when matplotlib is missing or the log has no timed Decode lines. With ``directory``, also
    written there as ``<name>.png``.

    Raises:
        OSError: the directory cannot be created or written.
    """
    if not have_matplotlib():
        return {}
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    single = doc["current"] if doc.get("schema") == BASELINE_SCHEMA else doc
    rows = single["timeline"]["decode"]
    out: dict[str, bytes] = {}
    if rows:
        t0 = rows[0][0]
        ts = [(r[0] - t0) for r in rows]
        retr = [(x - t0) for x in single["timeline"]["retractions"]]
        ceiling = single["batch_size"]["max_running_requests"]

        fig, ax = plt.subplots(figsize=(8, 3.2), dpi=100)
        ax.step(ts, [r[1] for r in rows], where="post", label="decode batch (#running-req)", color="#1f77b4")
        ax.step(ts, [r[2] if r[2] is not None else float("nan") for r in rows], where="post",
                label="queue (#queue-req)", color="#ff7f0e")
        if ceiling and ceiling <= 4 * max(r[1] for r in rows):
            ax.axhline(ceiling, color="#d62728", linestyle="--", label=f"ceiling {ceiling}")
        for x in retr:
            ax.axvline(x, color="#d62728", alpha=0.25, linewidth=1)
        ax.set_xlabel("seconds since first Decode line")
        ax.set_ylabel("requests")
        ax.set_title("Running batch and queue (red lines: retractions)")
        ax.legend(loc="best", fontsize=8)
        ax.grid(alpha=0.3)
        out["batch_queue"] = _png(fig, plt)

        fig, ax = plt.subplots(figsize=(8, 3.2), dpi=100)
        ax.plot(ts, [100 * r[3] if r[3] is not None else float("nan") for r in rows], marker=".", color="#2ca02c")
        for x in retr:
            ax.axvline(x, color="#d62728", alpha=0.25, linewidth=1)
        ax.set_ylim(0, 105)
        ax.set_xlabel("seconds since first Decode line")
        ax.set_ylabel("KV usage (%)")
        ax.set_title("KV-cache usage (red lines: retractions)")
        ax.grid(alpha=0.3)
        out["kv_usage"] = _png(fig, plt)

        fig, ax = plt.subplots(figsize=(8, 3.2), dpi=100)
        sizes = [r[1] for r in rows]
        ax.hist(sizes, bins=min(40, max(5, len(set(sizes)))), color="#1f77b4")
        for key, style in (("p50", ":"), ("p99", "--")):
            v = single["batch_size"]["decode"][key]
            if v is not None:
                ax.axvline(v, color="black", linestyle=style, label=f"{key} {v}")
        ax.set_xlabel("decode batch size")
        ax.set_ylabel("Decode lines")
        ax.set_title("Decode batch-size distribution")
        ax.legend(fontsize=8)
        out["batch_hist"] = _png(fig, plt)
    if directory:
        os.makedirs(directory, exist_ok=True)
        for name, data in out.items():
            with open(os.path.join(directory, f"{name}.png"), "wb") as f:
                f.write(data)
    return out


def _png(fig, plt) -> bytes:
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()

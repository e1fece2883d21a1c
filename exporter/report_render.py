"""Rendering of the ``sglang-exporter report`` document (:func:`exporter.report.analyse`).

* :func:`text`: the plain-text report (one section per checklist area, numbers then verdict);
* :func:`jsonable`: the document with non-finite floats replaced by ``None`` (strict JSON);
* :func:`html`: a self-contained page (CSS inline, plots as ``data:image/png;base64`` images);
* :func:`make_plots`: PNG plots with matplotlib (optional dependency, extra ``report``).

Both single reports and ``--baseline`` comparisons (``schema`` tells them apart) are handled.
"""

from __future__ import annotations

import base64
import html as _html
import io
import math
import os

from .report import BASELINE_SCHEMA


def have_matplotlib() -> bool:
    """True when matplotlib can be imported."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def jsonable(obj):
    """A copy of ``obj`` with NaN and infinities as ``None`` (JSON has neither)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    return obj


# -- formatting -----------------------------------------------------------------------------------

def _n(x, digits: int = 0) -> str:
    if x is None:
        return "n/a"
    if isinstance(x, float) and not math.isfinite(x):
        return "n/a"
    if isinstance(x, int) or digits == 0:
        return f"{x:,.0f}"
    return f"{x:,.{digits}f}"


def _p(x, digits: int = 1) -> str:
    return "n/a" if x is None else f"{100 * x:.{digits}f}%"


def _dist(d: dict, digits: int = 0, scale: float = 1.0, unit: str = "") -> str:
    if not d.get("count"):
        return "no samples"
    keys = [k for k in d if k.startswith("p")] + ["max"]
    parts = [f"{k.replace('_', '.')} {_n(d[k] * scale if d[k] is not None else None, digits)}{unit}" for k in keys]
    return ", ".join(parts) + f" (mean {_n(d['mean'] * scale, digits)}{unit}, n={d['count']})"


def _sections(doc: dict) -> list[tuple[str, list[tuple[str, str]], dict | None]]:
    """(title, [(label, value)], verdict) per section of a single report."""
    b, r, t, k, q = doc["batch_size"], doc["retractions"], doc["throughput"], doc["kv_capacity"], doc["queue_latency"]
    s = doc["settings"]
    out = []
    out.append(("1. Batch size", [
        ("decode batch (#running-req per Decode line)", _dist(b["decode"])),
        ("prefill batch (#new-seq per Prefill line)", _dist(b["prefill"])),
        ("configured ceiling (max_running_requests)",
         f"{_n(b['max_running_requests'])}" + (f" ({b['max_running_requests_source']})" if b["max_running_requests_source"]
                                               else " (not in the log)")),
        ("share of logged decode steps at the ceiling", _p(b["at_ceiling_share"])),
        ("KV usage per Decode line", _dist(b["kv_usage"], 0, 100, "%")),
        ("stats lines with an empty queue", _p(b["queue_empty_share"])),
    ], b["bound"]))
    out.append(("2. Retractions", [
        ("events / requests retracted", f"{r['events']} / {r['requests']}"
         + (f" (+{r['aborted_requests']} aborted)" if r["aborted_requests"] else "")
         + (f"; printed by {r['replicas_reporting']} replicas, counted once" if r["replicas_reporting"] > 1 else "")),
        ("KV tokens freed (#new_tokens_gained)", _n(r["freed_tokens"])),
        ("batches", f"{_n(r['batches'])} = {_n(r['prefill_batches'])} prefill + {_n(r['decode_steps'])} decode steps "
                    f"(Decode lines x {r['decode_log_interval']}, {r['decode_log_interval_source']})"),
        ("retraction share of batches (rule: 5%)", _p(r["share_of_batches"], 2)),
        (f"per {r['window_seconds']:g}-s window", f"peak {_p(r['peak_window_share'], 2)}, "
         f"{r['windows_above_rule']} of {len(r['windows'])} windows above 5%"),
        ("latest new_token_ratio", _n(r["latest_new_token_ratio"], 4)),
    ], r["verdict"]))
    out.append(("3. Throughput truth", [
        ("computed tokens", f"{_n(t['computed_tokens'])} = {_n(t['prefill_computed_tokens'])} prefill + "
                            f"{_n(t['decode_tokens'])} decode (estimated)"),
        ("recomputed tokens", f"{_n(t['recomputed_tokens'])}" + (f" ({t['recomputed_tokens_method']})"
                                                               if t["recomputed_tokens_method"] else "")
         + (f"; {t['retractions_not_sized']} retractions not sized" if t["retractions_not_sized"] else "")),
        ("useful tokens", _n(t["useful_tokens"])),
        ("recompute share of computed tokens", _p(t["recompute_share"])),
        ("tokens/s computed vs useful", f"{_n(t['computed_tokens_per_second'])} vs {_n(t['useful_tokens_per_second'])}"
                                        f" over {_n(t['seconds'])} s of stats lines"),
        ("SGLang gen throughput (Decode lines)", _dist(t["sglang_gen_throughput"])),
        ("cache-hit ratio (#cached-token / prompt tokens)", _p(t["cache_hit_ratio"])),
    ], t["verdict"]))
    kv_rows = [
        ("KV capacity (tokens)", f"{_n(k['capacity_tokens'])}" + (f" ({k['capacity_source']}"
                                 + (f", range {_n(k['capacity_estimate_range'][0])}-{_n(k['capacity_estimate_range'][1])}"
                                    if k["capacity_estimate_range"] else "") + ")" if k["capacity_source"] else "")),
        ("mean KV tokens per running request", f"{_n(k['mean_tokens_per_running_request'], 1)} "
                                               f"(per line: {_dist(k['tokens_per_running_request'])})"),
        ("theoretical capacity (requests)", _n(k["capacity_requests"], 1)),
        ("safe ceiling (x 0.7)", _n(k["safe_ceiling_requests"])),
        ("recommended --max-running-requests, offline (60-70%)",
         f"{k['recommended_max_running_requests_offline'][0]}-{k['recommended_max_running_requests_offline'][1]}"
         if k["recommended_max_running_requests_offline"] else "n/a"),
        ("configured ceiling / observed decode p99", f"{_n(k['max_running_requests'])} / {_n(k['decode_batch_p99'])}"),
    ]
    m = k.get("model")
    if m:
        kv_rows.append(("KV bytes per token (model config)", f"{_n(m['bytes_per_token'])} B = {m['formula']} "
                        f"(TP {m['tp_size']}, {m['tp_size_source']})"))
        kv_rows.append(("KV pool implied by the log's capacity", f"{_n(m['pool_gib'], 2)} GiB per rank"
                        + (f"; log says {_n(m['log_kv_alloc_gib'], 2)} GiB for {_n(m['log_kv_alloc_tokens'])} tokens"
                           f" (ratio {_n(m['log_vs_model_ratio'], 3)})" if m["log_kv_alloc_gib"] else "")))
    out.append(("4. KV capacity", kv_rows, k["verdict"]))
    out.append(("5. Queue and latency", [
        ("queue depth (#queue-req per Decode line)", _dist(q["depth"])),
        ("queue depth first / last / max", f"{_n(q['depth_first'])} / {_n(q['depth_last'])} / "
                                           f"{_n(q['depth_max_all_lines'])}"),
        ("time-weighted mean queue depth", _n(q["time_weighted_mean_depth"], 2)),
        ("admitted requests / admission rate", f"{q['admitted_requests']} / {_n(q['admission_rate_per_second'], 2)}/s"),
        ("estimated arrival rate", f"{_n(q['arrival_rate_per_second'], 2)}/s"),
        ("mean queue wait (Little's law)", f"{_n(q['mean_wait_seconds_littles_law'], 3)} s"),
        ("mean decode step (about TPOT)", f"{_n(q['decode_step_seconds'] * 1000 if q['decode_step_seconds'] else None, 1)} ms"),
        ("queue wait per request (ReqTimeStats)", _dist(q["queue_wait_seconds"], 3, 1, " s")
         + (f"; {q['queue_wait_negative_skipped']} negative skipped" if q["queue_wait_negative_skipped"] else "")),
        ("queue time per request (Finish)", _dist(q["finish_queue_time_seconds"], 3, 1, " s")),
        ("end-to-end latency (Finish)", _dist(q["e2e_latency_seconds"], 3, 1, " s")),
    ], q["verdict"]))
    out.append(("6. Scenario", [("saturation signals", "; ".join(doc["scenario"]["saturation_signals"]) or "none")],
                doc["scenario"]["verdict"]))
    st = doc["startup"]
    rows = [("server_args line", f"{len(st['server_args'])} parameters" if st["server_args_found"] else "not in the log")]
    for c in st["expected"]:
        rows.append((f"--expect {c['name']}", f"{c['status']}: expected {c['expected']}, found {c['found']}"))
    for c in st["adjusted_by_server"]:
        rows.append((f"{c['name']} adjusted", f"server_args {c['server_args']} -> in effect {c['effective']}"))
    out.append(("Start-up parameters", rows, st["verdict"]))
    return out


def _header(doc: dict) -> list[str]:
    sp = doc["span"]
    lines = doc["lines"]
    parsed = ", ".join(f"{k} {v}" for k, v in lines["parsed"].items() if v) or "none"
    bad = sum(lines["malformed"].values())
    rejected = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in lines.get("values_rejected", {}).items() if v)
    return [
        "inputs: " + ", ".join(f"{os.path.basename(i['path'])} ({i['lines']} lines)" for i in doc["inputs"]),
        f"span: {sp['first'] or 'no timestamps'} .. {sp['last'] or ''} ({_n(sp['seconds'])} s); "
        f"schedulers (DP ranks): {', '.join(doc['schedulers']) or 'none'}",
        f"scheduler lines: {parsed}; malformed {bad}; other {lines['ignored']}"
        + (f"; damaged values ignored: {rejected}" if rejected else ""),
    ]


def _text_single(doc: dict, title: str = "SGLang performance report") -> str:
    out = [title, "=" * len(title)] + _header(doc) + [""]
    for name, rows, verdict in _sections(doc):
        out.append(name)
        width = max(len(label) for label, _ in rows)
        for label, value in rows:
            out.append(f"  {label.ljust(width)}  {value}")
        if verdict:
            out.append(f"  -> {verdict['text']}")
        out.append("")
    out.append("Checklist (method.md, section 6)")
    for i, item in enumerate(doc["checklist"], 1):
        out.append(f"  {i}. {item['question']} [{item['answerable']}]")
        out.append(f"     {item['answer']}")
    return "\n".join(out) + "\n"


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:,.4g}" if abs(v) < 1000 else f"{v:,.0f}"
    return "n/a" if v is None else str(v)


def _text_baseline(doc: dict) -> str:
    out = ["SGLang performance report: baseline comparison", "=" * 46,
           "baseline: " + ", ".join(i["path"] for i in doc["baseline"]["inputs"]),
           "current:  " + ", ".join(i["path"] for i in doc["current"]["inputs"]), "",
           f"Figures (flagged when they change by more than {doc['threshold']:.0%}; {doc['flagged']} flagged)"]
    width = max(len(r["label"]) for r in doc["figures"])
    for r in doc["figures"]:
        ch = "" if r["change_ratio"] is None else f"{r['change_ratio']:+.1%}"
        out.append(f"  {r['label'].ljust(width)}  {_fmt(r['baseline']):>12}  {_fmt(r['current']):>12}  {ch:>8}"
                   + (f"  <- {r['flag']}" if r["flag"] else ""))
    out.append("")
    out.append("Verdicts (baseline -> current)")
    for sec, (a, b) in doc["verdicts"].items():
        out.append(f"  {sec.split('.')[0]:14} {a} -> {b}" + ("" if a == b else "  <- changed"))
    out.append("")
    d = doc["server_args_diff"]
    out.append("server_args difference (upgrade check: a renamed or dropped parameter falls back to its default)")
    if not (d["baseline_has_server_args"] and d["current_has_server_args"]):
        out.append("  cannot compare: server_args line missing in the "
                   + " and ".join(n for n, has in (("baseline", d["baseline_has_server_args"]),
                                                    ("current", d["current_has_server_args"])) if not has) + " log")
    for k, v in d["only_in_baseline"].items():
        out.append(f"  - {k}={v}  (gone: renamed or dropped?)")
    for k, v in d["only_in_current"].items():
        out.append(f"  + {k}={v}  (new)")
    for k, (a, b) in d["changed"].items():
        out.append(f"  ~ {k}: {a} -> {b}")
    if d["baseline_has_server_args"] and d["current_has_server_args"] and not (
            d["only_in_baseline"] or d["only_in_current"] or d["changed"]):
        out.append("  identical")
    out.append("")
    return "\n".join(out) + "\n" + _text_single(doc["baseline"], "Baseline report") + "\n" + \
        _text_single(doc["current"], "Current report")


def text(doc: dict) -> str:
    """The plain-text report of a single or baseline document."""
    return _text_baseline(doc) if doc.get("schema") == BASELINE_SCHEMA else _text_single(doc)


# -- plots ----------------------------------------------------------------------------------------

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


# -- HTML -----------------------------------------------------------------------------------------

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2rem auto;max-width:60rem;color:#222;padding:0 1rem}
h1{font-size:1.5rem}h2{font-size:1.15rem;margin-top:2rem;border-bottom:1px solid #ddd;padding-bottom:.2rem}
table{border-collapse:collapse;width:100%;font-size:.9rem}td,th{padding:.25rem .5rem;border-bottom:1px solid #eee;
text-align:left;vertical-align:top}td.label{width:40%;color:#555}.verdict{margin:.6rem 0;padding:.5rem .8rem;
border-left:4px solid #888;background:#f6f6f6}.bad{border-color:#d62728;background:#fdf0f0}.ok{border-color:#2ca02c;
background:#f0f9f0}.meta{color:#666;font-size:.85rem}img{max-width:100%;display:block;margin:.8rem 0}
.flag-worse{color:#d62728;font-weight:600}.flag-better{color:#2ca02c;font-weight:600}.flag-changed{color:#b8860b}
"""
_BAD = {"kv_memory", "above_rule", "fake_throughput", "unknown_recompute", "ceiling_above_safe", "not_steady",
        "mismatch", "throughput_first", "ceiling"}
_OK = {"none", "below_rule", "real", "minor_recompute", "ceiling_within_safe", "steady", "ok", "latency_first",
       "arrivals"}


def _e(s) -> str:
    return _html.escape(str(s))


def _verdict_html(v: dict | None) -> str:
    if not v:
        return ""
    cls = "bad" if v["code"] in _BAD else "ok" if v["code"] in _OK else ""
    return f'<div class="verdict {cls}" data-code="{_e(v["code"])}"><b>{_e(v["code"])}</b>: {_e(v["text"])}</div>'


def _img(name: str, plots: dict[str, bytes], alt: str) -> str:
    data = plots.get(name)
    if not data:
        return ""
    return f'<img alt="{_e(alt)}" id="plot-{name}" src="data:image/png;base64,{base64.b64encode(data).decode()}">'


def _single_html(doc: dict, plots: dict[str, bytes], heading: str) -> str:
    parts = [f"<h1>{_e(heading)}</h1>", '<p class="meta">' + "<br>".join(_e(x) for x in _header(doc)) + "</p>"]
    plot_for = {"1. Batch size": [("batch_queue", "running batch and queue over time"),
                                  ("batch_hist", "decode batch-size distribution")],
                "2. Retractions": [("kv_usage", "KV usage over time with retractions")]}
    for name, rows, verdict in _sections(doc):
        sid = name.split(" ", 1)[-1].lower().replace(" ", "-")
        parts.append(f'<section id="{_e(sid)}"><h2>{_e(name)}</h2><table>')
        parts += [f'<tr><td class="label">{_e(a)}</td><td>{_e(b)}</td></tr>' for a, b in rows]
        parts.append("</table>" + _verdict_html(verdict))
        parts += [_img(p, plots, alt) for p, alt in plot_for.get(name, [])]
        if name == "2. Retractions" and doc["retractions"]["windows"]:
            parts.append("<details><summary>per-window retraction share</summary><table><tr><th>window start</th>"
                         "<th>batches</th><th>retractions</th><th>share</th></tr>")
            parts += [f"<tr><td>{_e(w['start'])}</td><td>{_e(_n(w['batches']))}</td><td>{w['retractions']}</td>"
                      f"<td>{_e(_p(w['share'], 2))}</td></tr>" for w in doc["retractions"]["windows"]]
            parts.append("</table></details>")
        parts.append("</section>")
    parts.append('<section id="checklist"><h2>Checklist (method, section 6)</h2><ol>')
    parts += [f"<li><b>{_e(c['question'])}</b> <i>[{_e(c['answerable'])}]</i><br>{_e(c['answer'])}</li>"
              for c in doc["checklist"]]
    parts.append("</ol></section>")
    return "\n".join(parts)


def _change(x) -> str:
    return "" if x is None else _e(f"{x:+.1%}")


def html(doc: dict, plots: dict[str, bytes]) -> str:
    """A self-contained HTML page (no external resources) of a single or baseline document."""
    if doc.get("schema") == BASELINE_SCHEMA:
        rows = "".join(
            f"<tr><td>{_e(r['label'])}</td><td>{_e(_fmt(r['baseline']))}</td><td>{_e(_fmt(r['current']))}</td>"
            f"<td>{_change(r['change_ratio'])}</td>"
            f"<td class=\"flag-{_e(r['flag'] or '')}\">{_e(r['flag'] or '')}</td></tr>" for r in doc["figures"])
        d = doc["server_args_diff"]
        diff = "".join(f"<li>- {_e(k)}={_e(v)} (gone: renamed or dropped?)</li>" for k, v in d["only_in_baseline"].items())
        diff += "".join(f"<li>+ {_e(k)}={_e(v)} (new)</li>" for k, v in d["only_in_current"].items())
        diff += "".join(f"<li>~ {_e(k)}: {_e(a)} &rarr; {_e(b)}</li>" for k, (a, b) in d["changed"].items())
        if not (d["baseline_has_server_args"] and d["current_has_server_args"]):
            diff += "<li>cannot compare: a log has no server_args line</li>"
        body = (f"<h1>Baseline comparison</h1><section id=\"comparison\"><table><tr><th>figure</th><th>baseline</th>"
                f"<th>current</th><th>change</th><th>flag</th></tr>{rows}</table></section>"
                f"<section id=\"server-args-diff\"><h2>server_args difference</h2><ul>{diff or '<li>identical</li>'}"
                f"</ul></section>" + _single_html(doc["current"], plots, "Current run")
                + _single_html(doc["baseline"], {}, "Baseline run"))
    else:
        body = _single_html(doc, plots, "SGLang performance report")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>sglang-exporter report</title>"
            f"<style>{_CSS}</style></head><body>\n{body}\n"
            + ("" if have_matplotlib() else
               "<p class=\"meta\">Plots need matplotlib: pip install 'sglang-exporter[report]'.</p>")
            + "</body></html>\n")

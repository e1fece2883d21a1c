"""The HTML report: one self-contained page (CSS inline, plots as ``data:image/png;base64`` images)."""

from __future__ import annotations

import base64
import html as _html

from . import plots
from .baseline import BASELINE_SCHEMA
from .fmt import num, pct
from .rows import baseline_change, baseline_value, header, sections, stage_line

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


def _verdict(v: dict | None) -> str:
    if not v:
        return ""
    cls = "bad" if v["code"] in _BAD else "ok" if v["code"] in _OK else ""
    # the code is for machines (data-code); the reader gets the sentence
    return f'<div class="verdict {cls}" data-code="{_e(v["code"])}">{_e(v["text"])}</div>'


def _summary(doc: dict, prefix: str = "") -> str:
    """The page's opening: each section's verdict in its own words, the worrying ones marked.
    ``prefix`` starts its id, as in :func:`_single`."""
    items = []
    for name, _, v in sections(doc):
        if v:
            cls = "bad" if v["code"] in _BAD else "ok" if v["code"] in _OK else ""
            items.append(f'<li class="{cls}">{_e(name.split(" ", 1)[-1])}: {_e(v["text"])}</li>')
    return f'<section id="{_e(prefix)}summary"><h2>Summary</h2><ul>{"".join(items)}</ul></section>' if items else ""


def _img(name: str, images: dict[str, bytes], alt: str, prefix: str = "") -> str:
    data = images.get(name)
    if not data:
        return ""
    return f'<img alt="{_e(alt)}" id="{_e(prefix)}plot-{name}" src="data:image/png;base64,{base64.b64encode(data).decode()}">'


def _no_plots(doc: dict, images: dict[str, bytes], plotted: bool) -> str:
    """The reason, in the page, where a run that is plotted got no plots."""
    reason = plots.missing_reason(doc) if plotted and not images else None
    return f'<p class="meta no-plots">{_e(reason)}</p>' if reason else ""


def _single(doc: dict, images: dict[str, bytes], heading: str, stage_images: dict | None = None,
            plotted: bool = True, prefix: str = "") -> str:
    """One run's part of the page. Every id in it starts with ``prefix`` (``baseline-`` for the
    baseline run of a comparison), and a stage's with ``stage-NAME-`` after it, so that no id is
    repeated on the page (``summary`` once per SGLang Omni stage before)."""
    parts = [f"<h1>{_e(heading)}</h1>", '<p class="meta">' + "<br>".join(_e(x) for x in header(doc)) + "</p>"]
    stages = doc.get("stages") or {}
    if doc["schedulers"] or not stages:
        parts.append(_no_plots(doc, images, plotted))
        parts.append(_summary(doc, prefix))
        parts.append(_body(doc, images, prefix))
    for name, sub in stages.items():  # SGLang Omni: one block per stage, with its summary and plots
        mine = (stage_images or {}).get(name, {})
        sp = f"{prefix}stage-{name}"
        parts.append(f'<section class="stage" id="{_e(sp)}"><h1>Stage {_e(name)}</h1>'
                     f'<p class="meta">{_e(stage_line(sub))}</p>{_no_plots(sub, mine, plotted)}'
                     f'{_summary(sub, sp + "-")}{_body(sub, mine, sp + "-")}</section>')
    return "\n".join(parts)


def _body(doc: dict, images: dict[str, bytes], prefix: str = "") -> str:
    parts = []
    plot_for = {"1. Batch size": [("batch_queue", "running batch and queue over time"),
                                  ("batch_hist", "decode batch-size distribution")],
                "2. Retractions": [("kv_usage", "KV usage over time with retractions")]}
    for name, rows, verdict in sections(doc):
        sid = name.split(" ", 1)[-1].lower().replace(" ", "-")
        parts.append(f'<section id="{_e(prefix + sid)}"><h2>{_e(name)}</h2><table>')
        parts += [f'<tr><td class="label">{_e(a)}</td><td>{_e(b)}</td></tr>' for a, b in rows]
        parts.append("</table>" + _verdict(verdict))
        parts += [_img(p, images, alt, prefix) for p, alt in plot_for.get(name, [])]
        if name == "2. Retractions" and doc["retractions"]["windows"]:
            parts.append("<details><summary>per-window retraction share</summary><table><tr><th>window start</th>"
                         "<th>batches</th><th>retractions</th><th>share</th></tr>")
            parts += [f"<tr><td>{_e(w['start'])}</td><td>{_e(num(w['batches']))}</td><td>{w['retractions']}</td>"
                      f"<td>{_e(pct(w['share'], 2))}</td></tr>" for w in doc["retractions"]["windows"]]
            parts.append("</table></details>")
        parts.append("</section>")
    parts.append(f'<section id="{_e(prefix)}checklist"><h2>Checklist (method, section 6)</h2><ol>')
    parts += [f"<li><b>{_e(c['question'])}</b> <i>[{_e(c['answerable'])}]</i><br>{_e(c['answer'])}</li>"
              for c in doc["checklist"]]
    parts.append("</ol></section>")
    return "\n".join(parts)


def html(doc: dict, images: dict[str, bytes], stage_images: dict[str, dict[str, bytes]] | None = None) -> str:
    """A self-contained HTML page (no external resources) of a single or baseline document.

    ``images``: the run's plots (:func:`plots.make_plots`; of the current run in baseline mode);
    ``stage_images``: ``{stage: plots}`` of an SGLang Omni run. Where a plotted run has none, the
    page says why in their place (:func:`plots.missing_reason`)."""
    if doc.get("schema") == BASELINE_SCHEMA:
        rows = "".join(
            f"<tr><td>{_e(r['label'])}</td><td>{_e(baseline_value(r, 'baseline'))}</td>"
            f"<td>{_e(baseline_value(r, 'current'))}</td><td>{_e(baseline_change(r))}</td>"
            f"<td class=\"flag-{_e(r['flag'] or '')}\">{_e(r['flag'] or '')}</td></tr>" for r in doc["figures"])
        d = doc["server_args_diff"]
        diff = "".join(f"<li>- {_e(k)}={_e(v)} (gone: renamed or dropped?)</li>" for k, v in d["only_in_baseline"].items())
        diff += "".join(f"<li>+ {_e(k)}={_e(v)} (new)</li>" for k, v in d["only_in_current"].items())
        diff += "".join(f"<li>~ {_e(k)}: {_e(a)} &rarr; {_e(b)}</li>" for k, (a, b) in d["changed"].items())
        if not (d["baseline_has_server_args"] and d["current_has_server_args"]):
            diff += "<li>cannot compare: a log has no server_args line</li>"
        body = (f"<h1>Baseline comparison</h1><p id=\"judgement\">{_e(doc['judgement']['text'])}</p>"
                f"<section id=\"comparison\"><table><tr><th>figure</th><th>baseline</th>"
                f"<th>current</th><th>change</th><th>flag</th></tr>{rows}</table></section>"
                f"<section id=\"server-args-diff\"><h2>server_args difference</h2><ul>{diff or '<li>identical</li>'}"
                f"</ul></section>" + _single(doc["current"], images, "Current run", stage_images)
                + _single(doc["baseline"], {}, "Baseline run", plotted=False, prefix="baseline-"))
    else:
        body = _single(doc, images, "SGLang performance report", stage_images)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>sglang-exporter report</title>"
            f"<style>{_CSS}</style></head><body>\n{body}\n</body></html>\n")

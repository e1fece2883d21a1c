"""The comparison document in words: a fixed-width text table and a self-contained HTML page.

Each cell is a group's median (with the range ``min-max`` over repeats); each column's second header
line says whether the figure is ``exact``, ``estimated`` (as in ``report``) or measured by the
``client``; an n/a cell is numbered and its reason listed under the table. The default text table
holds the columns marked ``narrow`` (:mod:`exporter.compare.figures`) and fits :data:`WIDTH`
characters (the ranges over repeats are left out when they would not fit); ``wide`` gives every
column, as HTML and JSON do.
"""

from __future__ import annotations

import base64
import html as _html

from .figures import BY_KEY, GOODPUT_KEYS, Column

#: The default text table's width limit, in characters.
WIDTH = 120


def _one(x: float, col: Column) -> str:
    if col.unit == "share":
        return f"{100 * x:.{col.digits}f}%"
    if isinstance(x, int) or col.digits == 0:
        return f"{x:,.0f}"
    return f"{x:,.{col.digits}f}"


def cell(fig: dict, col: Column, ranges: bool = True) -> str:
    """A group's figure: ``median`` or ``median (min-max)``; ``n/a`` when unknown."""
    if fig["median"] is None:
        return "n/a"
    text = _one(fig["median"], col)
    if ranges and fig["n"] > 1 and fig["min"] != fig["max"]:
        text += f" ({_one(fig['min'], col)}-{_one(fig['max'], col)})"
    return text


def _kind(kind: str) -> str:
    return {"estimated": "est.", "exact": "exact", "client": "client"}.get(kind, kind)


def table(doc: dict, narrow: bool = False,
          ranges: bool = True) -> tuple[list[str], list[str], list[list[str]], list[str]]:
    """``(headers, kinds, rows, notes)``: the table's cells with n/a cells as ``n/a[k]`` and note k its
    reason; ``narrow``: only the columns marked so; ``ranges``: ``(min-max)`` over repeats in the cells."""
    cols = [BY_KEY[c["key"]] for c in doc["columns"]]
    if narrow:  # the goodput columns only when some run's client had --goodput
        cols = [c for c in cols if c.narrow and not (c.key in GOODPUT_KEYS and all(
            g["figures"][c.key]["median"] is None for g in doc["groups"]))]
    swept = doc.get("setting") or doc["swept"] or "setting"
    headers = [swept, "runs"] + [f"{c.label} {c.unit}" if c.unit in ("ms", "s") else c.label for c in cols]
    first = doc["groups"][0]["figures"] if doc["groups"] else {}
    kinds = ["", ""] + [_kind(first.get(c.key, {}).get("kind", c.kind)) for c in cols]
    notes: list[str] = []
    rows = []
    for g in doc["groups"]:
        row = [str(g["value"]), str(len(g["runs"]))]
        for c in cols:
            f = g["figures"][c.key]
            text = cell(f, c, ranges)
            if f["median"] is None and f["reason"]:
                if f["reason"] not in notes:
                    notes.append(f["reason"])
                text += f"[{notes.index(f['reason']) + 1}]"
            row.append(text)
        rows.append(row)
    return headers, kinds, rows, notes


def _lines(headers: list[str], kinds: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in [headers, kinds] + rows) for i in range(len(headers))]
    return ["  ".join(x.rjust(w) for x, w in zip(r, widths)).rstrip() for r in [headers, kinds] + rows]


def verdicts(doc: dict) -> list[str]:
    """The rules and the decisions, one sentence each, in reading order."""
    rules = doc["rules"]["text"]
    front = ", ".join(str(v) for v in doc["pareto"]) or "n/a (no setting has both figures)"
    return [f"Rule: {rules['knee']}.", doc["knee"]["text"], f"Rule: {rules['latency_knee']}.",
            doc["latency_knee"]["text"], f"Rule: {rules['online']}.", doc["online"]["text"],
            f"Pareto front (useful tok/s against P99 TTFT): {front}.", doc["offline"]["text"]]


def text(doc: dict, wide: bool = False) -> str:
    """The document as plain text (the default format); ``wide``: every column, else :data:`WIDTH` characters."""
    headers, kinds, rows, notes = table(doc, narrow=not wide)
    lines = _lines(headers, kinds, rows)
    cut = not wide and max(map(len, lines)) > WIDTH
    if cut:
        headers, kinds, rows, notes = table(doc, narrow=True, ranges=False)
        lines = _lines(headers, kinds, rows)
    out = [f"Comparison of {len(doc['runs'])} run(s), {len(doc['groups'])} setting(s); swept: "
           f"{doc['swept'] or 'nothing (all runs have the same settings)'}", ""]
    out += lines
    if not wide:
        out += ["(" + ("medians only; ranges over repeats and " if cut else "")
                + "more columns with --wide, --format json or html)"]
    if notes:
        out += [""] + [f"[{i}] n/a: {why}" for i, why in enumerate(notes, 1)]
    out += [""] + verdicts(doc) + ["", "Noise: " + doc["rules"]["text"]["noise"]]
    if doc["warnings"]:
        out += [""] + [f"warning: {w}" for w in doc["warnings"]]
    out += ["", "Runs:"] + [f"  {r['spec']}: {doc['setting']}={r['setting']}; logs {', '.join(r['logs'])}; client "
                           + (r["client_file"] or "none") + (f" (SGLang {r['sglang_version']})" if r["sglang_version"]
                                                             else "") for r in doc["runs"]]
    return "\n".join(out) + "\n"


_CSS = """body{font-family:system-ui,sans-serif;margin:2rem auto;max-width:75rem;color:#222;padding:0 1rem}
table{border-collapse:collapse;font-size:.85rem}
td,th{padding:.25rem .45rem;border-bottom:1px solid #eee;text-align:right}
th{background:#f6f6f6}.kind{color:#777;font-weight:normal}.warn{border-left:4px solid #d62728;background:#fdf0f0;
padding:.4rem .8rem;margin:.4rem 0}.verdict{border-left:4px solid #2ca02c;background:#f0f9f0;padding:.4rem .8rem;
margin:.4rem 0}img{max-width:100%;display:block;margin:.8rem 0}.meta{color:#666;font-size:.85rem}"""


def html(doc: dict, images: dict[str, bytes]) -> str:
    """The document as one self-contained HTML page, with the plots of :func:`exporter.compare.plots.make_plots`."""
    e = _html.escape
    headers, kinds, rows, notes = table(doc)
    head = "".join(f"<th>{e(h)}<br><span class=kind>{e(k)}</span></th>" for h, k in zip(headers, kinds))
    body = "".join("<tr>" + "".join(f"<td>{e(x)}</td>" for x in r) + "</tr>" for r in rows)
    parts = [f"<!doctype html><html><head><meta charset=utf-8><title>sglang-exporter compare</title>"
             f"<style>{_CSS}</style></head><body><h1>Comparison: {e(doc['swept'] or 'no swept setting')}</h1>",
             f"<table data-schema='{e(doc['schema'])}'><tr>{head}</tr>{body}</table>"]
    parts += [f"<p class=meta>[{i}] n/a: {e(why)}</p>" for i, why in enumerate(notes, 1)]
    for k in ("knee", "latency_knee", "online"):
        parts.append(f"<p>Rule: {e(doc['rules']['text'][k])}.</p>")
        parts.append(f"<div class=verdict id={k}>{e(doc[k]['text'])}</div>")
    parts.append(f"<p>Pareto front (useful tok/s against P99 TTFT): "
                 f"{e(', '.join(str(v) for v in doc['pareto']) or 'n/a')}.</p>")
    parts.append(f"<div class=verdict id=offline>{e(doc['offline']['text'])}</div>")
    parts.append(f"<p class=meta>Noise: {e(doc['rules']['text']['noise'])}</p>")
    parts += [f"<div class=warn>warning: {e(w)}</div>" for w in doc["warnings"]]
    for name, alt in (("throughput", "useful and computed tokens/s against the swept setting"),
                      ("latency", "P99 TTFT and retraction share against the swept setting"),
                      ("pareto", "useful tokens/s against P99 TTFT, one point per setting, the front drawn")):
        if name in images:
            data = base64.b64encode(images[name]).decode()
            parts.append(f'<img alt="{e(alt)}" src="data:image/png;base64,{data}">')
    parts.append("<h2>Runs</h2><ul>" + "".join(
        f"<li>{e(r['spec'])}: {e(doc['setting'])}={e(str(r['setting']))}; client {e(r['client_file'] or 'none')}</li>"
        for r in doc["runs"]) + "</ul></body></html>")
    return "\n".join(parts) + "\n"

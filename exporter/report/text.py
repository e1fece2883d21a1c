"""The plain-text report: one block per checklist section (figures, then the verdict), the checklist,
and for ``--baseline`` the comparison table before both reports. An SGLang Omni log gets these blocks
once per stage."""

from __future__ import annotations

from .baseline import BASELINE_SCHEMA
from .rows import baseline_change, baseline_value, header, sections, stage_line


def _single(doc: dict, title: str = "SGLang performance report") -> str:
    out = [title, "=" * len(title)] + header(doc) + [""]
    stages = doc.get("stages") or {}
    if doc["schedulers"] or not stages:
        out += _body(doc)
    for name, sub in stages.items():  # SGLang Omni: one block per stage, never merged
        heading = f"Stage {name}"
        out += [heading, "-" * len(heading), "  " + stage_line(sub), ""] + _body(sub)
    return "\n".join(out).rstrip("\n") + "\n"


def _body(doc: dict) -> list[str]:
    """The sections and the checklist of one document (a run, or one SGLang Omni stage)."""
    out = []
    for name, rows, verdict in sections(doc):
        out.append(name)
        width = max(len(label) for label, _ in rows)
        for label, value in rows:
            out.append(f"  {label.ljust(width)}  {value}")
        if verdict:
            out.append(f"  -> {verdict['text']}")
        out.append("")
    out.append("Checklist (docs/method.md, section 6)")
    for i, item in enumerate(doc["checklist"], 1):
        out.append(f"  {i}. {item['question']} [{item['answerable']}]")
        out.append(f"     {item['answer']}")
    out.append("")
    return out


def _baseline(doc: dict) -> str:
    out = ["SGLang performance report: baseline comparison", "=" * 46,
           "baseline: " + ", ".join(i["path"] for i in doc["baseline"]["inputs"]),
           "current:  " + ", ".join(i["path"] for i in doc["current"]["inputs"]), "",
           doc["judgement"]["text"], "",
           f"Figures (flagged when they change by more than {doc['threshold']:.0%}; {doc['flagged']} flagged; "
           "shares in %, their change in percentage points)"]
    width = max(len(r["label"]) for r in doc["figures"])
    for r in doc["figures"]:
        out.append(f"  {r['label'].ljust(width)}  {baseline_value(r, 'baseline'):>12}  "
                   f"{baseline_value(r, 'current'):>12}  {baseline_change(r):>10}"
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
    return "\n".join(out) + "\n" + _single(doc["baseline"], "Baseline report") + "\n" + \
        _single(doc["current"], "Current report")


def text(doc: dict) -> str:
    """The plain-text report of a single or baseline document."""
    return _baseline(doc) if doc.get("schema") == BASELINE_SCHEMA else _single(doc)

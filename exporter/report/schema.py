"""The report document's shape: every key with its domain, assembled from the section modules.

:data:`DOCUMENT` is the domain tree of a single report (``"schema": SCHEMA``), :data:`BASELINE` that of
a ``--baseline`` comparison. :func:`violations` lists the places where a document leaves its
domains; :func:`enforce` is the last-resort guard that turns such a value into ``null`` with a reason
(the tests require that the sections never leave it anything to do).
"""

from __future__ import annotations

from . import baseline, batch, classes, header, kv, queue, ranks, retractions, scenario, startup, starts, throughput
from .domains import LABEL, UNEXPECTED, ListOf, MapOf, Record, dotted
from .domains import violations as _violations

SCHEMA = header.SCHEMA
BASELINE_SCHEMA = baseline.BASELINE_SCHEMA

#: Top-level keys of a single report, in order (stable: the JSON contract).
TOP_KEYS = ("schema", "inputs", "lines", "span", "schedulers", "settings", "batch_size", "retractions",
            "throughput", "kv_capacity", "queue_latency", "dp_balance", "priority_classes", "scenario", "checklist", "startup", "starts", "timeline", "stages")
#: The sections whose figures carry an n/a reason in ``not_available``.
FIGURE_SECTIONS = {"batch_size": batch.DOMAINS, "retractions": retractions.DOMAINS,
                   "throughput": throughput.DOMAINS, "kv_capacity": kv.DOMAINS, "queue_latency": queue.DOMAINS,
                   "dp_balance": ranks.DOMAINS, "priority_classes": classes.DOMAINS}

#: One SGLang Omni stage's document (``stages.<name>``): a single report without ``stages``.
STAGE_DOCUMENT = Record({
    "schema": LABEL,
    "inputs": header.INPUTS,
    "lines": header.LINES,
    "span": header.SPAN,
    "schedulers": ListOf(LABEL),
    "settings": header.SETTINGS,
    **{name: Record(d) for name, d in FIGURE_SECTIONS.items()},
    "scenario": Record(scenario.DOMAINS),
    "checklist": scenario.CHECKLIST,
    "startup": Record(startup.DOMAINS),
    "starts": Record(starts.DOMAINS),
    "timeline": header.TIMELINE,
})
DOCUMENT = Record({**STAGE_DOCUMENT.fields, "stages": MapOf(STAGE_DOCUMENT)})
BASELINE = baseline.domains(DOCUMENT)


def violations(doc: dict) -> list[tuple[str, object, str]]:
    """``[(dotted path, value, why)]`` for every value of ``doc`` outside its domain; ``[]`` when none."""
    spec = BASELINE if doc.get("schema") == BASELINE_SCHEMA else DOCUMENT
    return [(dotted(path), value, why) for path, value, why in _violations(doc, spec)]


def enforce(doc: dict) -> int:
    """Replace every value of a single report (and of each of its SGLang Omni stages' documents) outside
    its domain by ``None``, with a reason in its section's ``not_available`` map under the dotted key.
    Returns how many values were replaced."""
    replaced = sum(enforce(sub) for sub in (doc.get("stages") or {}).values())
    found = [v for v in _violations(doc, DOCUMENT) if v[0][:1] != ("stages",)]
    for path, _, why in found:
        parent = doc
        for part in path[:-1]:
            parent = parent[part]
        if isinstance(parent, dict) or (isinstance(parent, list) and isinstance(path[-1], int)):
            parent[path[-1]] = None
        section = doc.get(path[0]) if path else None
        if isinstance(section, dict) and isinstance(section.get("not_available"), dict):
            section["not_available"][dotted(path[1:])] = f"{UNEXPECTED}: {why}"
    return len(found) + replaced


def jsonable(obj):
    """A copy of ``obj`` with NaN and infinities as ``None`` (JSON has neither)."""
    if isinstance(obj, float):
        return obj if obj == obj and obj not in (float("inf"), float("-inf")) else None
    if isinstance(obj, dict):
        return {k: jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    return obj

"""The comparison document (``"schema": SCHEMA``), the one thing text, HTML and JSON are written from.

Keys (stable, the JSON contract for CI; values ``null`` where unknown, with a ``reason``):

* ``schema``; ``swept``: the swept setting (:mod:`exporter.compare.sweep`), or ``null``;
* ``rules``: ``knee_gain_per_doubling``, ``retraction_rule``, ``ttft_slo_seconds``, ``noise`` (the
  definitions, in words under ``text``);
* ``columns``: ``[{"key", "label", "source", "kind", "unit"}]`` in table order;
* ``runs``: ``[{"spec", "logs", "client_file", "client_reason", "sglang_version", "setting",
  "figures": {key: {"value", "kind", "reason"}}}]`` in the order given;
* ``groups``: ``[{"value", "runs": [index into runs], "figures": {key: {"median", "min", "max", "n",
  "spread_ratio", "kind", "reason"}}}]`` in swept order (the table's rows);
* ``steps``: neighbouring groups compared (:func:`exporter.compare.decide.steps`);
* ``knee``, ``online``, ``offline``: ``{"value", "text", "sure"}``;
* ``warnings``: sentences, one per setting that differs beyond the swept one.
"""

from __future__ import annotations

from ..report.retractions import RETRACTION_RULE
from . import decide, sweep
from .figures import COLUMNS, figures
from .runs import Run

SCHEMA = "sglang-exporter-compare/1"
NOISE_RULE = ("Runs with the same settings are repeats: each figure is their median with its range; a "
              "difference between two settings whose ranges overlap is noise, not a change; with one run "
              "per setting the noise is unknown.")


def build(runs: list[Run], ttft_slo: float | None = None, sweep_name: str | None = None) -> dict:
    """The document of ``runs`` (see the module docstring); ``ttft_slo`` in seconds, ``sweep_name``
    forces the swept setting."""
    all_settings = [sweep.settings(r) for r in runs]
    swept = sweep.swept_setting(sweep.differing(all_settings), sweep_name)
    figs = [figures(r) for r in runs]
    groups = sweep.groups(runs, figs, all_settings, swept)
    step_rows = decide.steps(groups, swept)
    warnings = sweep.warnings(runs, all_settings, swept)
    for r in runs:
        if r.client is None:
            warnings.append(f"{r.spec}: client figures n/a ({r.client_reason})")
    return {
        "schema": SCHEMA,
        "swept": swept,
        "rules": {"knee_gain_per_doubling": decide.KNEE_GAIN, "retraction_rule": RETRACTION_RULE,
                  "ttft_slo_seconds": ttft_slo,
                  "text": {"knee": (f"the knee is the last setting before useful tokens/s rises less than "
                                    f"{100 * decide.KNEE_GAIN:.0f}% per doubling while P99 TTFT or retractions rise"),
                           "online": "the largest setting whose P99 TTFT meets --ttft-slo",
                           "offline": (f"the most useful tokens/s with retractions under "
                                       f"{100 * RETRACTION_RULE:.0f}% of batches"),
                           "noise": NOISE_RULE}},
        "columns": [{"key": c.key, "label": c.label, "source": c.source, "kind": c.kind, "unit": c.unit}
                    for c in COLUMNS],
        "runs": [{"spec": r.spec, "logs": r.logs, "client_file": r.client_path, "client_reason": r.client_reason,
                  "sglang_version": r.version, "setting": s.get(swept, sweep.NOT_GIVEN) if swept else None,
                  "figures": f}
                 for r, s, f in zip(runs, all_settings, figs)],
        "groups": groups,
        "steps": step_rows,
        "knee": decide.knee(groups, step_rows, swept),
        "online": decide.online(groups, swept, ttft_slo),
        "offline": decide.offline(groups, swept),
        "warnings": warnings,
    }

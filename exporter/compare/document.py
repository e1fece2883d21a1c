"""The comparison document (``"schema": SCHEMA``), the one thing text, HTML and JSON are written from.

Keys (stable, the JSON contract for CI; values ``null`` where unknown, with a ``reason``):

* ``schema``; ``swept``: the swept setting (:mod:`exporter.compare.sweep`), or ``null``; ``setting``:
  the setting the table's first column shows (the swept one, else ``max_running_requests``);
* ``rules``: ``knee_gain_per_doubling``, ``retraction_rule``, ``ttft_slo_seconds``,
  ``tpot_slo_seconds``, ``noise`` (the definitions, in words under ``text``: ``knee``,
  ``latency_knee``, ``online``, ``offline``, ``noise``);
* ``columns``: ``[{"key", "label", "source", "kind", "unit"}]`` in table order;
* ``runs``: ``[{"spec", "logs", "client_file", "client_reason", "sglang_version", "setting",
  "figures": {key: {"value", "kind", "reason"}}}]`` in swept order (the order given among equal values);
* ``groups``: ``[{"value", "runs": [index into runs], "figures": {key: {"median", "min", "max", "n",
  "spread_ratio", "kind", "reason"}}}]`` in swept order (the table's rows);
* ``steps``: neighbouring groups compared (:func:`exporter.compare.decide.steps`);
* ``knee`` (throughput), ``latency_knee``, ``online``, ``offline``: ``{"value", "text", "sure"}``;
* ``pareto``: the settings on the front of useful tokens/s against P99 TTFT (:func:`exporter.compare.decide.pareto`);
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


def build(runs: list[Run], ttft_slo: float | None = None, sweep_name: str | None = None,
          tpot_slo: float | None = None) -> dict:
    """The document of ``runs`` (see the module docstring); ``ttft_slo`` and ``tpot_slo`` in seconds,
    ``sweep_name`` forces the swept setting."""
    all_settings = [sweep.settings(r) for r in runs]
    swept = sweep.swept_setting(sweep.differing(all_settings), sweep_name)
    shown = swept or sweep.DEFAULT_SWEEP
    order = sorted(range(len(runs)), key=lambda i: sweep.sort_key(all_settings[i].get(shown, sweep.NOT_GIVEN)))
    runs, all_settings = [runs[i] for i in order], [all_settings[i] for i in order]
    figs = [figures(r) for r in runs]
    groups = sweep.groups(runs, figs, all_settings, shown)
    step_rows = decide.steps(groups, swept)
    warnings = sweep.warnings(runs, all_settings, swept)
    for r in runs:
        if r.client is None:
            warnings.append(f"{r.spec}: client figures n/a ({r.client_reason})")
    return {
        "schema": SCHEMA,
        "swept": swept,
        "setting": shown,
        "rules": {"knee_gain_per_doubling": decide.KNEE_GAIN, "retraction_rule": RETRACTION_RULE,
                  "ttft_slo_seconds": ttft_slo, "tpot_slo_seconds": tpot_slo,
                  "text": {"knee": (f"the throughput knee is the last setting before useful tokens/s rises less "
                                    f"than {100 * decide.KNEE_GAIN:.0f}% per doubling while P99 TTFT or "
                                    "retractions rise"),
                           "latency_knee": ("the latency knee is the last setting before P99 TTFT grows by a "
                                            "larger factor than useful tokens/s"),
                           "online": ("the most useful tokens/s among the settings whose P99 TTFT meets "
                                      "--ttft-slo (and P99 TPOT --tpot-slo); never one another setting beats "
                                      "on both"),
                           "offline": (f"the most useful tokens/s with retractions under "
                                       f"{100 * RETRACTION_RULE:.0f}% of batches"),
                           "noise": NOISE_RULE}},
        "columns": [{"key": c.key, "label": c.label, "source": c.source, "kind": c.kind, "unit": c.unit}
                    for c in COLUMNS],
        "runs": [{"spec": r.spec, "logs": r.logs, "client_file": r.client_path, "client_reason": r.client_reason,
                  "sglang_version": r.version, "setting": s.get(shown, sweep.NOT_GIVEN),
                  "figures": f}
                 for r, s, f in zip(runs, all_settings, figs)],
        "groups": groups,
        "steps": step_rows,
        "knee": decide.knee(groups, step_rows, swept),
        "latency_knee": decide.latency_knee(groups, swept),
        "pareto": decide.pareto(groups),
        "online": decide.online(groups, swept, ttft_slo, tpot_slo),
        "offline": decide.offline(groups, swept),
        "warnings": warnings,
    }

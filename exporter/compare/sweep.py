"""Which setting the runs sweep, which runs repeat one setting, and what else changed.

A run's settings are its log's ``server_args`` (the last such line), its ceiling from the report's
``settings`` when the log has no ``server_args``, and ``sglang_version`` when the log's header or the
client file says (:mod:`exporter.compare.runs`), and the client's load (:data:`LOAD_KEYS`, as
``load.<key>``). :data:`PER_START` names the ``server_args`` that
differ on every start without changing what is measured (ports, the random seed SGLang draws,
paths of this run's files); they are not compared.

The swept setting: the one named with ``--sweep``; else ``max_running_requests`` when it differs;
else the only setting that differs (the first in name order when several do, each other one warned
about). Runs with equal swept values are repeats of one setting (a group).
"""

from __future__ import annotations

import math
import statistics

from .figures import COLUMNS
from .runs import Run

#: server_args that change on every start and do not change the measurement.
PER_START = frozenset({"port", "nccl_port", "dist_init_addr", "random_seed", "metrics_http_port",
                       "forward_pass_metrics_ipc_name", "log_requests_target", "crash_dump_folder",
                       "file_storage_path", "served_model_name_suffix", "bootstrap_port"})
#: The benchmark client's keys that describe the load (compared as ``load.<key>``: the method wants the
#: same load for every setting).
LOAD_KEYS = ("backend", "dataset_name", "request_rate", "max_concurrency", "random_input_len", "random_output_len",
             "random_range_ratio", "sharegpt_output_len")
#: The swept value of a run whose log does not give the setting.
NOT_GIVEN = "not given"
#: The setting a sweep of the method changes (docs/method.md).
DEFAULT_SWEEP = "max_running_requests"


def settings(run: Run) -> dict[str, str]:
    """The run's comparable settings: ``server_args`` less :data:`PER_START`, plus the ceiling and version."""
    out = {k: v for k, v in run.server_args.items() if k not in PER_START}
    ceiling = (run.doc.get("settings") or {}).get("max_running_requests")
    if "max_running_requests" not in out or out["max_running_requests"] in ("None", ""):
        if ceiling is not None:
            out["max_running_requests"] = str(ceiling)
    if run.version:
        out["sglang_version"] = run.version
    for key in LOAD_KEYS:
        if run.client is not None and run.client.get(key) is not None:
            out[f"load.{key}"] = str(run.client[key])
    return out


def differing(all_settings: list[dict[str, str]]) -> list[str]:
    """The setting names whose value is not the same in every run (a missing one counts as a value)."""
    names = sorted(set().union(*all_settings)) if all_settings else []
    return [n for n in names if len({s.get(n) for s in all_settings}) > 1]


def sort_key(value: str | None) -> tuple:
    """Numbers in numeric order, then other values in text order, then unknown."""
    if value is None or value == NOT_GIVEN:
        return (2, "")
    try:
        return (0, float(value), "")
    except ValueError:
        return (1, value)


def as_number(value: str | None) -> float | None:
    """The swept value as a number, or ``None`` (``"None"``, text, missing)."""
    try:
        x = float(value) if value is not None else None
    except ValueError:
        return None
    return x if x is not None and math.isfinite(x) else None


def swept_setting(diff: list[str], chosen: str | None) -> str | None:
    """The setting the runs sweep (module docstring); ``None`` when all runs have the same settings."""
    if chosen:
        return chosen
    if DEFAULT_SWEEP in diff:
        return DEFAULT_SWEEP
    return diff[0] if diff else None


def warnings(runs: list[Run], all_settings: list[dict[str, str]], swept: str | None) -> list[str]:
    """One sentence per setting that differs beyond the swept one, naming the values per run."""
    out = []
    for name in differing(all_settings):
        if name == swept:
            continue
        values = ", ".join(f"{r.spec}: {s.get(name, NOT_GIVEN)}" for r, s in zip(runs, all_settings))
        out.append(f"{name} differs beyond the swept setting"
                   + (f" {swept}" if swept else "") + f" ({values}): the runs differ in more than one thing, "
                   "so a change in the table may come from it")
    return out


def stats(values: list[float]) -> dict:
    """``{"median", "min", "max", "n", "spread_ratio"}`` of a group's values (``spread_ratio`` =
    (max - min) / median, ``None`` for a single run or a zero median); all ``None`` when no run gives one."""
    if not values:
        return {"median": None, "min": None, "max": None, "n": 0, "spread_ratio": None}
    med = statistics.median(values)
    lo, hi = min(values), max(values)
    return {"median": med, "min": lo, "max": hi, "n": len(values),
            "spread_ratio": (hi - lo) / abs(med) if len(values) > 1 and med else None}


def groups(runs: list[Run], figs: list[dict], all_settings: list[dict[str, str]], swept: str | None) -> list[dict]:
    """The groups of repeats in swept order: ``[{"value", "number", "runs": [index], "figures": {key: stats
    + "kind" + "reason"}}]`` (``reason``: the first run's n/a reason when no run of the group gives the figure)."""
    by_value: dict[str | None, list[int]] = {}
    for i, s in enumerate(all_settings):
        by_value.setdefault(s.get(swept, NOT_GIVEN) if swept else None, []).append(i)
    out = []
    for value in sorted(by_value, key=sort_key):
        idx = by_value[value]
        g = {"value": value, "number": as_number(value), "runs": idx, "figures": {}}
        for col in COLUMNS:
            cells = [figs[i][col.key] for i in idx]
            vals = [c["value"] for c in cells if c["value"] is not None]
            kinds = {c["kind"] for c in cells}
            g["figures"][col.key] = {**stats(vals), "kind": kinds.pop() if len(kinds) == 1 else "estimated",
                                     "reason": None if vals else cells[0]["reason"]}
        out.append(g)
    return out


def within_noise(a: dict, b: dict) -> bool | None:
    """Whether two groups' figures overlap (``[min, max]`` ranges): ``True`` noise, ``False`` a change,
    ``None`` unknown (a single run on either side, or a figure missing)."""
    if a["median"] is None or b["median"] is None or a["n"] < 2 or b["n"] < 2:
        return None
    return a["min"] <= b["max"] and b["min"] <= a["max"]


def groups_of_table(name: str, rows: list[tuple[str, dict[str, float | None]]]) -> list[dict]:
    """Groups (as :func:`groups`, one run each) from a published table instead of logs: ``rows`` are
    ``(value of the setting name, {column key: figure})``; a column a row lacks is n/a with the reason
    "not in the table". For checking the rules of :mod:`exporter.compare.decide` on others' sweeps."""
    out = []
    for i, (value, figs) in enumerate(sorted(rows, key=lambda r: sort_key(r[0]))):
        g = {"value": value, "number": as_number(value), "runs": [i], "figures": {}}
        for col in COLUMNS:
            v = figs.get(col.key)
            g["figures"][col.key] = {**stats([] if v is None else [v]), "kind": col.kind,
                                     "reason": None if v is not None else f"not in the {name} table"}
        out.append(g)
    return out

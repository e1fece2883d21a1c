"""SGLang Omni's answers -> typed snapshots, keeping only what is well formed.

Shapes (SGLang Omni ``main``, 2026-08; ``docs/sglang-omni.md``):

* ``GET /health`` (``serve/openai_api.py`` from ``Coordinator.health()``): ``{"status": "healthy" |
  "unhealthy", "running": bool, "stages": [name, ...], "entry_stage": name, "total_requests": n,
  "pending_completions": n, "request_states": {"pending" | "running" | ...: n}}``; 503 when not running.
* ``GET /model_info`` (admin): the coordinator's admin fan-out ``{"op_id", "action": "model_info",
  "success": bool, "message", "results": [AdminResult, ...], "stages": <the same list>,
  "weight_version", "model_path", "load_format"}``, each ``AdminResult`` (``proto/admin.py``)
  ``{"op_id", "stage", "action", "success", "message", "data", "error", "rank", "role"}``. An SGLang
  stage's ``data`` (``OmniScheduler._admin_model_info``) holds ``waiting_queue_size``,
  ``running_batch_size``, ``request_build_pending``, ``request_admission_pending``,
  ``request_build_backlog``, ``engine_paused``, ``stage_tp_rank``/``stage_tp_size`` and model facts;
  other stages answer ``{"skipped": true}`` or ``{"unsupported": true}``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...events import STAGE_NAME as NAME
from ...limits import MAX_COUNT_DIGITS

#: Most stages kept from one answer (an Omni pipeline has about ten).
MAX_STAGES = 64
#: Per-stage counts of ``/model_info`` that become gauges, by data key.
STAGE_COUNTS = ("waiting_queue_size", "running_batch_size", "request_build_pending", "request_admission_pending",
                "request_build_backlog")
_MAX = 10 ** MAX_COUNT_DIGITS


def _count(value: Any) -> int | None:
    """A JSON count (a non-negative integer, not a bool), else None."""
    if type(value) is int and 0 <= value < _MAX:
        return value
    return None


@dataclass(frozen=True, slots=True)
class Health:
    """``/health``: ``running`` (bool or None), ``pending_completions``, ``request_states`` (state ->
    requests, state names as Omni spells them)."""

    running: bool | None = None
    pending_completions: int | None = None
    request_states: dict[str, int] = field(default_factory=dict)


def health(body: dict[str, Any]) -> Health:
    """Read a ``/health`` body; fields that are missing or malformed are left out."""
    running = body.get("running")
    states = body.get("request_states")
    kept: dict[str, int] = {}
    if isinstance(states, dict):
        for name, n in list(states.items())[:MAX_STAGES]:
            if isinstance(name, str) and NAME.fullmatch(name) and _count(n) is not None:
                kept[name] = n
    return Health(running if isinstance(running, bool) else None, _count(body.get("pending_completions")), kept)


def model_info(body: dict[str, Any]) -> dict[str, dict[str, int]] | None:
    """Per SGLang-backed stage, its counts (:data:`STAGE_COUNTS`) and ``engine_paused`` (0/1), from a
    ``/model_info`` body; ``None`` when the body is not Omni's admin answer.

    A TP stage may answer per rank: the leader's (role ``leader``/``single``, or rank 0) is taken.
    Stages whose data has no ``waiting_queue_size`` run no SGLang scheduler and are left out.
    """
    results = body.get("results", body.get("stages"))
    if not isinstance(results, list):
        return None
    out: dict[str, dict[str, int]] = {}
    for item in results:
        if not isinstance(item, dict) or item.get("success") is False:
            continue
        stage, data = item.get("stage"), item.get("data")
        if not (isinstance(stage, str) and NAME.fullmatch(stage) and isinstance(data, dict)):
            continue
        if item.get("role") not in (None, "single", "leader") or item.get("rank") not in (None, 0):
            continue
        if "waiting_queue_size" not in data or stage in out:
            continue
        if len(out) >= MAX_STAGES:
            break
        values = {key: n for key in STAGE_COUNTS if (n := _count(data.get(key))) is not None}
        paused = data.get("engine_paused")
        if isinstance(paused, bool):
            values["engine_paused"] = int(paused)
        out[stage] = values
    return out

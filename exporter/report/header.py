"""The report's header: what was read (inputs, lines, span), the settings in effect, the timeline.

Figures (all exact counts of what was read): per input ``bytes``, ``lines``, ``oversized_lines``
(skipped), ``scheduler_lines``; ``lines``: parsed and malformed lines per kind, other lines,
damaged numbers of what the report takes beyond the scheduler counters (ignored), and (top level) SGLang Omni lines of
several stages that no stage could claim (``unattributed``, per kind); ``span``: the first and last
time-stamped line of any kind, ``seconds`` between them, ``stats_seconds`` between the first and last
Prefill/Decode line and ``active_seconds`` the same with silences capped (see
:mod:`exporter.report.basis`).
"""

from __future__ import annotations

from ..limits import QUEUE_SAMPLE_MAX_GAP_SECONDS
from ..paths import display_path
from .basis import Basis
from .domains import AMOUNT, COUNT, FLAG, LABEL, POSITIVE, SHARE, TIME, ListOf, MapOf, Record, Row
from .fmt import iso_time
from .upstream import KINDS

#: Version tag of the JSON document; bumped only when a key is renamed or removed.
SCHEMA = "sglang-exporter-report/1"

INPUTS = ListOf(Record({"path": LABEL, "bytes": COUNT, "lines": COUNT, "oversized_lines": COUNT,
                        "scheduler_lines": COUNT}))
LINES = Record({"parsed": MapOf(COUNT), "malformed": MapOf(COUNT), "ignored": COUNT,
                "values_rejected": MapOf(COUNT), "unattributed": MapOf(COUNT),
                "unattributed_reasons": ListOf(LABEL)})
SPAN = Record({"first": LABEL, "last": LABEL, "seconds": AMOUNT, "stats_seconds": AMOUNT,
               "active_seconds": AMOUNT, "idle_gaps": COUNT, "idle_gap_cap_seconds": AMOUNT,
               "timestamps": FLAG, "timestamped_lines": COUNT, "time_of_day_only": FLAG})
SETTINGS = Record({"decode_log_interval": POSITIVE, "decode_log_interval_source": LABEL,
                   "max_running_requests": POSITIVE, "max_total_num_tokens": COUNT,
                   "chunked_prefill_size": POSITIVE, "chunked_prefill_size_source": LABEL,
                   "context_len": COUNT, "tp_size": POSITIVE, "tp_size_source": LABEL})
TIMELINE = Record({"decode": ListOf(Row((TIME, COUNT, COUNT, SHARE))), "retractions": ListOf(TIME)})


def inputs(b: Basis) -> list[dict]:
    return [{"path": display_path(i.path), "bytes": i.bytes, "lines": i.lines, "oversized_lines": i.oversized_lines,
             "scheduler_lines": i.scheduler_lines} for i in b.inputs]


def lines(b: Basis) -> dict:
    rec = b.rec
    kinds = [k for k in KINDS if k != "other"]
    sa_tp = rec.server_args.get("tp_size")
    return {"parsed": {k: rec.lines[(k, "parsed")] for k in kinds},
            "malformed": {k: rec.lines[(k, "malformed")] for k in kinds},
            "ignored": rec.lines[("other", "ignored")],
            # damaged values beyond the scheduler counters: Finish records, the parser's malformed KV Cache
            # lines, server_args' tp_size; ignored
            "values_rejected": {"finish": rec.finish.rejected, "kv_alloc": rec.kv_alloc_rejected,
                                "server_args_tp_size": int(bool(sa_tp) and b.tp_source != "server_args"),
                                "usage_above_1": rec.usage_rejected}}


def span(b: Basis) -> dict:
    rec = b.rec
    tod = rec.time_of_day_only
    has = rec.first_time is not None
    return {"first": iso_time(rec.first_time, tod), "last": iso_time(rec.last_time, tod),
            "seconds": (rec.last_time - rec.first_time) if has else None,
            "stats_seconds": b.stats_seconds, "active_seconds": b.active_seconds, "idle_gaps": b.idle_gaps,
            "idle_gap_cap_seconds": QUEUE_SAMPLE_MAX_GAP_SECONDS, "timestamps": has,
            "timestamped_lines": rec.timestamped_lines, "time_of_day_only": tod}


def settings(b: Basis) -> dict:
    cap = b.capacity_line
    return {"decode_log_interval": b.interval, "decode_log_interval_source": b.interval_source,
            "max_running_requests": b.ceiling, "max_total_num_tokens": cap.max_total_num_tokens if cap else None,
            "chunked_prefill_size": b.chunk, "chunked_prefill_size_source": b.chunk_source,
            "context_len": cap.context_len if cap else None, "tp_size": b.tp_size, "tp_size_source": b.tp_source}


def timeline(b: Basis) -> dict:
    rows = sorted((r for r in b.decode if r.t is not None), key=lambda r: r.t)
    return {"decode": [[r.t, r.running, r.queue, r.kv_ratio] for r in rows],
            "retractions": sorted(r.t for rows in b.retractions_by_sched.values() for r in rows if r.t is not None)}

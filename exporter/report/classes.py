"""Priority classes: the per-class table of the report, where an input has priorities.

SGLang's scheduler lines (``Prefill batch``, ``Decode batch``, retractions) carry no priority, and no
line the report reads does: the table is n/a with that reason. The classes are in SGLang's own
/metrics with ``--enable-priority-scheduling`` (the ``group_priority_class:*`` recording rules and the
Scheduler dashboard's priority row); ``priority_scheduling`` says what the log's ``server_args`` line
set (``on``, ``off``, or ``unknown`` without the line).
"""

from __future__ import annotations

from .basis import Basis
from .domains import AMOUNT, COUNT, LABEL, REASONS, MapOf, Record, Figures

#: One class's row, should an input ever give it: requests, queue wait and TTFT p99 in seconds.
CLASS = Record({"requests": COUNT, "queue_wait_p99_seconds": AMOUNT, "ttft_p99_seconds": AMOUNT})

DOMAINS = {"priority_scheduling": LABEL, "classes": MapOf(CLASS), "not_available": REASONS}

NO_PRIORITY = "the scheduler log carries no priority"


def unseen_preemptions(b: Basis) -> str | None:
    """Why priority preemptions cannot be seen in this log, or ``None`` where there are none to see.

    Source: the log's ``server_args`` line. With ``enable_priority_scheduling=True`` SGLang (since
    2025-09, ``preempt_to_schedule``) takes a running request's place for a waiting one whose
    priority is higher by at least ``priority_scheduling_preemption_threshold`` (default 10): the
    preempted request is put back in the queue and its prompt computed again, but no line is
    printed and ``sglang:num_retracted_requests_total`` does not count it. Without the flag, or
    without the ``server_args`` line (older logs), ``None``.
    """
    if b.rec.server_args.get("enable_priority_scheduling") != "True":
        return None
    threshold = b.rec.server_args.get("priority_scheduling_preemption_threshold")
    return ("priority scheduling was on (server_args enable_priority_scheduling=True"
            + (f", priority_scheduling_preemption_threshold={threshold}" if threshold else "")
            + "): SGLang preempts a running request for a waiting one of higher priority without a log line "
            "and without counting it in sglang:num_retracted_requests_total, so preemptions and the prompt "
            "tokens they compute again cannot be seen in this log (SGLang's own /metrics have them: "
            "sglang:realtime_tokens_total{mode=\"prefill_compute\"} minus "
            "sglang:prefill_effective_tokens_total{mode=\"input\"})")


def section(b: Basis) -> dict:
    """The ``priority_classes`` section of the report document."""
    f = Figures(DOMAINS)
    flag = b.rec.server_args.get("enable_priority_scheduling")
    state = "unknown" if flag is None else "on" if flag == "True" else "off"
    f.put("priority_scheduling", state)
    where = {"on": "; priority scheduling was on (server_args): SGLang's own /metrics have the classes "
                   "(the group_priority_class:* rules)",
             "off": "; priority scheduling was off (server_args)",
             "unknown": ""}[state]
    f.set("classes", None, NO_PRIORITY + where)
    return f.done()

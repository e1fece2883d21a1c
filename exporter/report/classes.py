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

"""The start-up check: did every parameter the server was launched with take effect?

``--expect NAME=VALUE`` is checked against the log's ``server_args`` dump, else against the start-up
capacity line for the values it prints (``max_running_requests``, ``chunked_prefill_size``,
``max_total_num_tokens``, ``max_prefill_tokens``, ``context_len``). A log with neither cannot show a
parameter: its status is ``unchecked`` and the verdict says so (a missing start-up line is not a
parameter that failed). ``adjusted_by_server`` lists the values the server changed between
``server_args`` and the capacity line (SGLang adjusts some at start-up).
"""

from __future__ import annotations

from .basis import Basis
from .domains import FLAG, FREE, LABEL, VERDICT, ListOf, Record, verdict

EXPECTED = Record({"name": LABEL, "expected": LABEL, "found": LABEL, "source": LABEL, "status": LABEL})
DOMAINS = {
    "server_args_found": FLAG,
    "server_args": FREE,
    "expected": ListOf(EXPECTED),
    "adjusted_by_server": ListOf(FREE),
    "verdict": VERDICT,
}
#: Values the start-up capacity line prints, by ``server_args`` name.
CAPACITY_FIELDS = ("max_running_requests", "chunked_prefill_size", "max_total_num_tokens", "max_prefill_tokens",
                   "context_len")
NO_SERVER_ARGS = ("start the server at --log-level info and keep the start-up lines")
#: SGLang Omni never prints ``server_args`` (0.1.9: at any level; docs/sglang-omni.md).
NO_SERVER_ARGS_OMNI = ("SGLang Omni prints none at any log level: give each stage's decode interval with "
                       "--stage-decode-log-intervals")


def _no_server_args(b: Basis) -> str:
    """What to do about a log without ``server_args``: SGLang's advice, or Omni's."""
    return NO_SERVER_ARGS_OMNI if b.rec.stages else NO_SERVER_ARGS


def _check(name: str, wanted: str, b: Basis) -> dict:
    sa = b.rec.server_args
    cap = b.capacity_line
    if name in sa:
        got, source = sa[name], "server_args"
    elif not sa and cap is not None and name in CAPACITY_FIELDS and getattr(cap, name) is not None:
        got, source = str(getattr(cap, name)), "capacity line"
    else:
        got, source = None, None
    if got is not None:
        status = "ok" if got.strip("'\"") == wanted.strip("'\"") else "different"
    else:
        status = "missing" if sa else "unchecked"
    return {"name": name, "expected": wanted, "found": got, "source": source, "status": status}


def section(b: Basis, expect: dict[str, str] | None) -> dict:
    """The ``startup`` section of the report document."""
    sa = b.rec.server_args
    checks = [_check(name, wanted, b) for name, wanted in (expect or {}).items()]
    adjusted = []
    sa_event, cap = b.rec.states.server_args, b.capacity_line
    if sa_event is not None and cap is not None:
        for name in ("max_running_requests", "chunked_prefill_size"):
            x, y = getattr(sa_event, name), getattr(cap, name)
            if x is not None and y is not None and x != y:
                adjusted.append({"name": name, "server_args": x, "effective": y})
    bad = [c for c in checks if c["status"] in ("different", "missing")]
    unchecked = [c for c in checks if c["status"] == "unchecked"]
    if bad:
        v = verdict("mismatch", "Some expected parameters did not take effect: "
                    + ", ".join(f"{c['name']} ({c['status']})" for c in bad)
                    + (f"; {len(unchecked)} cannot be checked (not in this log's start-up lines)" if unchecked else ""))
    elif unchecked:
        v = verdict("unchecked", "The log cannot show "
                    + ", ".join(c["name"] for c in unchecked)
                    + (": it has no server_args line" if not sa else "")
                    + f" ({_no_server_args(b)}), so --expect cannot say whether "
                    + ("it" if len(unchecked) == 1 else "they") + " took effect."
                    + (" The others are as expected." if len(checks) > len(unchecked) else ""))
    elif checks:
        v = verdict("ok", "Every expected parameter is in the log's start-up lines with its value.")
    else:
        v = verdict("unchecked", "No --expect given." + ("" if sa else f" The log has no server_args line ({_no_server_args(b)})."))
    return {"server_args_found": bool(sa), "server_args": sa, "expected": checks,
            "adjusted_by_server": adjusted, "verdict": v}

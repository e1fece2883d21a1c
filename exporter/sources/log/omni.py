"""SGLang Omni's own lines: one line in Omni's format in, one typed event (or nothing) out.

SGLang Omni prints SGLang's scheduler lines (``Prefill batch``, ``Decode batch``, retractions), which
:mod:`.parser` reads in every format. This module reads the lines that only an Omni server prints, and
only in Omni's format, ``DATE TIME,ms [LEVEL] [process/thread] logger: message`` (the bracketed
``process/thread`` token comes from the logging shim, ``deploy/sglang-omni/sitecustomize.py``), so
that a plain SGLang log gives exactly what it gave before. Formats are those of Omni ``main`` up to
2026-08 and the SGLang versions it pinned (0.5.8 .. 0.5.18); ``docs/sglang-omni.md`` lists each line
with its source.

* The decode CUDA-graph capture list ``bs=[...]`` of each stage (the proxy of its batch ceiling; the
  stage's capacity comes from SGLang's ``KV Cache is allocated`` line, which :mod:`.parser` reads in every
  format: Omni never prints SGLang's ``max_total_num_tokens=`` line).
* Start-up lines that tell which stage runs where (:class:`~exporter.events.OmniStartup`, read by
  :mod:`.attribution`).
* Admission (submitted, aborted, rejected by reason), stage lifecycle, the coordinator's in-flight cap.

Like the parser, nothing here raises, and the patterns are linear (fixed anchors, bounded repeats).
"""

from __future__ import annotations

import re

from ...events import (
    CudaGraphCapture,
    Event,
    OmniAdmission,
    OmniInFlightCap,
    OmniStageEvent,
    OmniStartup,
    STAGE_NAME,
)
from ...limits import MAX_COUNT_DIGITS
from .prefix import parse_origin

#: Omni's prefix (see the module docstring), searched in the first 512 characters of a line so that a
#: wrapper's prefix (a container runtime's, say) may precede it.
_LINE = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} \[[A-Z]{4,8}\] "
                   r"(?:\[[^\[\]/]{1,200}/[^\[\]]{1,200}\] )?([\w.<>-]{1,200}): ")
_PREFIX_SPAN = 512
#: The part of Omni's prefix no other format has (``,mmm [``): a cheap first test of every line the
#: SGLang titles did not claim (a fifth of the full pattern's cost on an access-log line).
_HINT = re.compile(r",\d\d\d \[")
NAME = STAGE_NAME
_QUOTED = re.compile(r"'([^']{0,100})'")
_LOCK_DEVICE = re.compile(r"sglang_omni_gpu_([A-Za-z0-9_.-]{1,64})_startup\.lock")
_STAGE_STATE = re.compile(r"Stage ([A-Za-z0-9_][A-Za-z0-9_.-]{0,63}) (started|stopped)\Z")


class OmniDamage(Exception):
    """Internal: a recognised Omni line whose value cannot be read."""


def _count(text: str) -> int:
    if not (text.isascii() and text.isdigit() and len(text) <= MAX_COUNT_DIGITS):
        raise OmniDamage(f"not a count: {text[:40]!r}")
    return int(text)


def _name(text: str) -> str:
    if NAME.fullmatch(text) is None:
        raise OmniDamage(f"not a stage name: {text[:40]!r}")
    return text


def _after(msg: str, key: str, stop: str) -> str:
    """The text after ``key`` up to ``stop`` (or the end)."""
    i = msg.find(key)
    if i < 0:
        raise OmniDamage(f"missing {key.strip()!r}")
    i += len(key)
    j = msg.find(stop, i)
    return msg[i:j if j >= 0 else len(msg)]


def _bs_max(body: str) -> int:
    values = [v.strip() for v in body.split(",")]
    if not values or values == [""]:
        raise OmniDamage("empty bs list")
    return max(_count(v) for v in values)


def parse_omni_line(line: str) -> Event | tuple[str, str] | None:
    """Read one line of SGLang Omni's own (see the module docstring).

    Args:
        line: One line without its terminator.

    Returns:
        An event of :mod:`exporter.events` (``CudaGraphCapture``, ``OmniStartup``,
        ``OmniAdmission``, ``OmniStageEvent``, ``OmniInFlightCap``) whose origin has the line's time and
        Omni ``task``; ``("omni", reason)`` for a recognised line whose value is damaged (the parser
        turns it into ``Malformed``); ``None`` for every other line, and for every line not in Omni's
        format. Never raises.
    """
    if _HINT.search(line, 0, _PREFIX_SPAN) is None:
        return None
    m = _LINE.search(line, 0, _PREFIX_SPAN)
    if m is None:
        return None
    start = m.end()
    msg = line[start:].rstrip()
    try:
        ev = _message(msg, m.group(1), line, start)
    except OmniDamage as exc:
        return ("omni", str(exc))
    except (ValueError, IndexError) as exc:  # defence in depth: every known path raises OmniDamage
        return ("omni", f"{type(exc).__name__}")
    return ev


def _message(msg: str, logger: str, line: str, start: int) -> Event | None:
    c = msg[:1]
    if c == "C":
        if msg.startswith("Capture target decode CUDA graph begin."):
            return CudaGraphCapture(parse_origin(line[:start]), _bs_max(_after(msg, "bs=[", "]")))
        if msg.startswith("Capture cuda graph bs ["):
            return CudaGraphCapture(parse_origin(line[:start]), _bs_max(_after(msg, "bs [", "]")))
        if msg.startswith("Coordinator submitted req="):
            return OmniAdmission(parse_origin(line[:start]), "submitted")
        if msg.startswith("Coordinator aborted req="):
            return OmniAdmission(parse_origin(line[:start]), "aborted")
        if msg.startswith("Coordinator in-flight cap="):
            return OmniInFlightCap(parse_origin(line[:start]), _count(_after(msg, "cap=", " ")))
        return None
    if c == "s" and msg.startswith("sglang_ar_startup stage="):
        return OmniStartup(parse_origin(line[:start]), "ar_startup", stage=_name(_after(msg, "stage=", " ")))
    if c == "B" and msg.startswith("Building scheduler for "):
        process = logger[14:] if logger.startswith("stage_workers.") else ""
        return OmniStartup(parse_origin(line[:start]), "building", stage=_name(_after(msg, "for ", " (")),
                           process=process if NAME.fullmatch(process) else "")
    if c == "A" and msg.startswith("Acquired GPU startup lock for stage "):
        dev = _LOCK_DEVICE.search(msg)
        return OmniStartup(parse_origin(line[:start]), "lock", stage=_name(_after(msg, "stage ", ":")),
                           gpu=dev.group(1) if dev else "")
    if c == "S":
        if msg.startswith("SGLang runtime configuration: gpu_id="):
            gpu = _after(msg, "gpu_id=", ",").strip()
            return OmniStartup(parse_origin(line[:start]), "runtime_config", gpu=gpu if NAME.fullmatch(gpu) else "")
        if msg.startswith("Stage "):
            st = _STAGE_STATE.match(msg)
            return OmniStageEvent(parse_origin(line[:start]), st.group(2), stage=st.group(1)) if st else None
        if msg.startswith("Scheduler thread for stage ") and msg.endswith(" crashed"):
            return OmniStageEvent(parse_origin(line[:start]), "crashed", stage=_name(msg[27:-8]))
        return None
    if c == "P" and msg.startswith("Process ") and " ready with stages=" in msg:
        process = _after(msg, "Process ", " ready with")
        names = tuple(_name(n) for n in _QUOTED.findall(_after(msg, "stages=", "\n")))
        return OmniStartup(parse_origin(line[:start]), "process_ready", stages=names,
                           process=process if NAME.fullmatch(process) else "")
    if c == "M" and msg.startswith("MultiProcessPipelineRunner started: "):
        return OmniStartup(parse_origin(line[:start]), "pipeline_started")
    if c == "D" and msg.startswith("Dead stage process(es) detected"):
        return OmniStageEvent(parse_origin(line[:start]), "dead", processes=max(msg.count("(pid="), 1))
    if c == "R" and msg.startswith("Rejecting request "):
        if " before pipeline submit: in-flight cap" in msg:
            reason = "in_flight_cap"
        elif " before build: The request queue is full." in msg:
            reason = "queue_full"
        elif ": waiting queue is full (" in msg:
            reason = "waiting_queue_full"
        elif " before scheduling: Request requires more tokens than the " in msg:
            reason = "kv_capacity"
        else:
            return None
        return OmniAdmission(parse_origin(line[:start]), "rejected", reason)
    if c == "r" and msg.startswith("rejecting request ") and ": prompt " in msg and " >= max_seq_len " in msg:
        return OmniAdmission(parse_origin(line[:start]), "rejected", "prompt_too_long")
    return None

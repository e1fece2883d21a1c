"""Stage attribution: which SGLang Omni stage printed a line, between the parser and the store.

A scheduler is ``(stage, dp_rank)``. Plain SGLang's lines have no stage (``""``) and pass through
untouched. SGLang Omni runs one SGLang scheduler per autoregressive stage (Qwen3-Omni's ``thinker`` and
``talker_ar``, Ming's thinker, the TTS engines), all printing the same lines into one stream
(``docs/sglang-omni.md``). :class:`StageAttribution` gives each Omni line its stage:

* **With the logging shim** (``deploy/sglang-omni/sitecustomize.py``) every line carries
  ``[processName/threadName]`` (:attr:`~exporter.events.Origin.task`). A scheduler thread is named
  ``scheduler-<stage>``; a stage process ``stage-<stage>``, ``stage-<stage>-leader`` (TP rank 0) or
  ``stage-<stage>-tp<N>-follower`` (TP rank N: its lines are a replica, ``TP<N>``, counted once);
  a process of several colocated stages ``process-<group>``, whose start-up lines belong to the stage
  it announced with ``Building scheduler for <stage>`` (stages are built one after the other).
* **Without the shim**, a line names no stage. With exactly one SGLang-backed stage every scheduler
  line is that stage's; the stage is named by ``sglang_ar_startup stage=<stage>`` (Qwen3-Omni,
  MiniCPM-o, Ming) or, for pipelines that do not print it (the TTS engines), by the GPU start-up lock
  held when SGLang printed ``SGLang runtime configuration`` (``Acquired GPU startup lock for stage
  <stage>`` on that GPU). With several such stages, with none named (the start-up lines were not
  read), or when a start-up line could belong to two stages, scheduler lines are **unattributed**:
  they go to no stage's metrics, are counted (``sglang_exporter_log_lines_total{result="unattributed"}``),
  and a warning naming the fix is logged once per reason.

A start-up line of a stage being built after every stage had started begins a new run (the server
restarted, appending to the same log): the stages are learnt afresh, so a restart with other stages
does not leave the previous run's stages behind (every line of the new run was unattributed).

How many SGLang-backed stages there are is known only once every stage has started: without the
shim, a stage's start-up lines that need a stage (``KV Cache is allocated``, the CUDA-graph capture)
are held until then (``MultiProcessPipelineRunner started``, the first request or stats line, or
:meth:`StageAttribution.finish` at the end of a recorded log), so that the first stage to start is
not taken for the only one.

What is learnt is bounded whatever the log says: at most :data:`MAX_KNOWN` processes, stages, GPUs
and start-up names are remembered (the oldest forgotten first), a process's stage list is kept up to
:data:`MAX_PROCESS_STAGES` names, and a new run forgets the processes the previous one was building
(start-up lines with ever-new names, or 1 MB ``stages=[...]`` lists, grew it without bound).

Pipeline facts (admissions, rejections) are never dropped: without a stage they are the pipeline's
(``stage=""``). Not thread-safe: one ingest step (or the report) owns an instance.
"""

from __future__ import annotations

import logging
import re
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import replace

from ...events import (
    OMNI_PIPELINE_EVENTS,
    CudaGraphCapture,
    Event,
    KvAllocation,
    OmniAdmission,
    OmniStartup,
)
from .omni import NAME

log = logging.getLogger(__name__)

_FOLLOWER = re.compile(r"(.+)-tp(\d{1,4})-follower")
#: Start-up lines that need a stage: held, without the shim, until every stage has started.
_HELD_KINDS = (KvAllocation, CudaGraphCapture)
#: Start-up lines of a stage being built: seen after every stage had started, they begin a new run
#: of the server (a restart appending to the same log), whose stages are learnt afresh.
_RUN_START_KINDS = ("ar_startup", "building", "lock", "runtime_config")
#: Most start-up events held (a pipeline prints a few per stage); past it they are decided at once.
MAX_HELD = 256
#: Most processes, stages, GPUs and start-up names remembered (a pipeline has a dozen at most).
MAX_KNOWN = 256
#: Most stage names kept of one process's ``stages=[...]`` (more than one is "colocated" anyway).
MAX_PROCESS_STAGES = 16


def _put(table: OrderedDict, key, value) -> None:
    """``table[key] = value``, the newest last, the oldest forgotten past :data:`MAX_KNOWN`."""
    table[key] = value
    table.move_to_end(key)
    while len(table) > MAX_KNOWN:
        table.popitem(last=False)

#: Why a scheduler line has no stage (the warning says which), by reason.
REASONS = {
    "several_stages": "SGLang Omni runs {n} SGLang-backed stages ({stages}) and its log lines do not say which "
                      "stage printed them",
    "unknown_stages": "no start-up line of SGLang Omni named its SGLang-backed stage (the exporter started "
                      "after them, or the log was rotated since)",
    "ambiguous": "an SGLang Omni start-up line could belong to several stages ({stages})",
    "no_stage": "an SGLang Omni process that runs no stage scheduler printed a scheduler line",
    "colocated": "a process of several colocated SGLang Omni stages printed a scheduler line outside a "
                 "stage's scheduler thread",
}
FIX = ("Put deploy/sglang-omni/sitecustomize.py on the Omni server's PYTHONPATH so that every line carries "
       "its process and thread (docs/sglang-omni.md); until then these lines are counted as unattributed "
       "(sglang_exporter_log_lines_total{result=\"unattributed\"}) and go to no stage's metrics")


class StageAttribution:
    """Gives the events of an SGLang Omni log their stage (see the module docstring).

    Args:
        warn: Called once per reason with the warning text (default: ``log.warning``); the report
            passes its own.

    Attributes:
        sglang_stages: SGLang-backed stages known so far (start-up lines, the shim's tokens).
        process_stages: Stages of each Omni process group (``Process P ready with stages=[...]``).
        unattributed: Scheduler events left without a stage, by reason.
    """

    def __init__(self, warn: Callable[[str], None] | None = None):
        self.sglang_stages: set[str] = set()
        self.process_stages: OrderedDict[str, tuple[str, ...]] = OrderedDict()
        self.unattributed: Counter[str] = Counter()
        self._building: OrderedDict[str, str] = OrderedDict()  # shim process name -> stage it builds
        self._pending_startup: set[str] = set()    # sglang_ar_startup names since the last runtime line
        self._pending_lock: OrderedDict[str, str] = OrderedDict()  # GPU -> stage holding its start-up lock
        self._doubt: tuple[str, ...] = ()          # the stages a runtime line could belong to
        self._settled = False                      # every stage has started (see the module docstring)
        self._held: list[Event] = []               # stock-format start-up events waiting for that
        self._warned: set[str] = set()
        self._warn = warn if warn is not None else (lambda text: log.warning("%s", text))

    # -- reading ----------------------------------------------------------------------------------

    def attribute(self, events: Iterable[Event]) -> tuple[list[Event], list[tuple[Event, str]]]:
        """Give each event its stage.

        Args:
            events: Parsed events in log order.

        Returns:
            ``(kept, unattributed)``: the events to apply, plain SGLang's unchanged and Omni's with
            ``origin.stage`` (and a TP follower's ``origin.replica``) set; and the scheduler events
            that no stage can claim, each with its reason (a key of :data:`REASONS`). An Omni start-up
            event held until every stage has started is in neither yet; it comes out of a later call
            (or :meth:`finish`), before that call's own events.
        """
        kept: list[Event] = []
        dropped: list[tuple[Event, str]] = []
        for ev in events:
            origin = ev.origin
            if origin.task is None:  # not SGLang Omni's format: plain SGLang, as it always was
                kept.append(ev)
                continue
            kind = type(ev)
            if kind is OmniStartup:
                if self._settled and ev.kind in _RUN_START_KINDS:
                    self._new_run()
                ev = self._learn(ev)
                kept.append(ev)
                if ev.kind == "pipeline_started":
                    self._settle(kept, dropped)
                continue
            if not self._settled and not origin.task:
                if kind in _HELD_KINDS and len(self._held) < MAX_HELD:
                    self._held.append(ev)
                    continue
                if kind not in OMNI_PIPELINE_EVENTS or kind is OmniAdmission:  # serving: every stage is up
                    self._settle(kept, dropped)
            self._one(ev, kept, dropped)
        return kept, dropped

    def finish(self) -> tuple[list[Event], list[tuple[Event, str]]]:
        """Decide the held start-up events now (the end of a recorded log): ``(kept, unattributed)``."""
        kept: list[Event] = []
        dropped: list[tuple[Event, str]] = []
        self._settle(kept, dropped)
        return kept, dropped

    def _new_run(self) -> None:
        """Forget which SGLang-backed stages the previous run of the server had (it restarted, maybe
        with other stages): they are learnt again from this run's start-up lines."""
        self.sglang_stages = set()
        self._pending_startup = set()
        self._pending_lock = OrderedDict()
        self._building = OrderedDict()
        self._doubt = ()
        self._settled = False

    def _settle(self, kept: list[Event], dropped: list[tuple[Event, str]]) -> None:
        self._settled = True
        held, self._held = self._held, []
        for ev in held:
            self._one(ev, kept, dropped)

    def _one(self, ev: Event, kept: list[Event], dropped: list[tuple[Event, str]]) -> None:
        """Give one Omni event its stage (into ``kept``), or none (into ``dropped``, with the reason)."""
        origin, kind = ev.origin, type(ev)
        stage, replica, reason = self._resolve(origin.task)
        if kind in OMNI_PIPELINE_EVENTS:
            # pipeline facts are never dropped: without a stage they are the pipeline's
            kept.append(ev if kind is not OmniAdmission or not stage else
                        replace(ev, origin=replace(origin, stage=stage, replica=replica)))
            return
        if reason:
            self.unattributed[reason] += 1
            self._warn_once(reason)
            dropped.append((ev, reason))
            return
        if origin.task:
            self._add_stage(stage)
        kept.append(replace(ev, origin=replace(origin, stage=stage, replica=replica or origin.replica)))

    def _resolve(self, task: str) -> tuple[str, str, str]:
        """``(stage, replica, "")`` for a line's task token, or ``("", "", reason)``."""
        if not task:  # Omni's stock format: only a single SGLang-backed stage can be named
            if self._doubt:
                return "", "", "ambiguous"
            n = len(self.sglang_stages)
            if n == 1:
                return next(iter(self.sglang_stages)), "", ""
            return "", "", "several_stages" if n else "unknown_stages"
        process, _, thread = task.partition("/")
        replica = ""
        stage = ""
        if process.startswith("stage-"):
            rest = process[6:]
            if rest.endswith("-leader"):
                stage, replica = rest[:-7], "TP0"
            else:
                m = _FOLLOWER.fullmatch(rest)
                stage, replica = (m.group(1), f"TP{int(m.group(2))}") if m else (rest, "")
        if thread.startswith("scheduler-"):
            stage = thread[10:]
        elif process.startswith("process-"):
            stage = self._building.get(process, "")
            if not stage:
                group = self.process_stages.get(process[8:], ())
                if len(group) != 1:
                    return "", "", "colocated" if group else "no_stage"
                stage = group[0]
        if not stage or NAME.fullmatch(stage) is None:
            return "", "", "no_stage"
        return stage, replica, ""

    def _learn(self, ev: OmniStartup) -> OmniStartup:
        """Learn from a start-up line; a ``runtime_config`` line comes back with the stage it names."""
        kind, task = ev.kind, ev.origin.task
        if kind == "ar_startup":
            self._add_stage(ev.stage)
            if len(self._pending_startup) < MAX_KNOWN:
                self._pending_startup.add(ev.stage)
        elif kind == "process_ready":
            if ev.process:
                _put(self.process_stages, ev.process, ev.stages[:MAX_PROCESS_STAGES])
        elif kind in ("building", "lock"):
            if task:
                _put(self._building, task.partition("/")[0], ev.stage)
            if kind == "lock":
                _put(self._pending_lock, ev.gpu, ev.stage)
        elif kind == "runtime_config":
            stage = ""
            if task:  # the shim names the process: the stage it builds
                stage, _, reason = self._resolve(task.partition("/")[0] + "/MainThread")
                stage = "" if reason else stage
            if not stage:
                stage = self._runtime_stage(ev.gpu)
            if stage:
                self._add_stage(stage)
                return replace(ev, stage=stage)
        return ev

    def _add_stage(self, stage: str) -> None:
        """Know ``stage`` as SGLang-backed (at most :data:`MAX_KNOWN`: the store's scheduler cap
        refuses more anyway)."""
        if len(self.sglang_stages) < MAX_KNOWN or stage in self.sglang_stages:
            self.sglang_stages.add(stage)

    def _runtime_stage(self, gpu: str) -> str:
        """The stage an unmarked ``SGLang runtime configuration`` line belongs to, or ``""``."""
        if self._pending_startup:
            names = self._pending_startup
            self._pending_startup = set()
            for dev, stage in list(self._pending_lock.items()):
                if stage in names:
                    del self._pending_lock[dev]
            return next(iter(names)) if len(names) == 1 else ""
        locks = self._pending_lock
        if len(locks) == 1:
            return locks.pop(next(iter(locks)))
        if gpu in locks:
            return locks.pop(gpu)
        if locks:  # a lock on another GPU, or several: this line could be any of their stages
            self._doubt = tuple(sorted(set(locks.values())))
        return ""

    def _warn_once(self, reason: str) -> None:
        if reason in self._warned:
            return
        self._warned.add(reason)
        stages = sorted(self.sglang_stages) if reason == "several_stages" else list(self._doubt)
        text = REASONS[reason].format(n=len(stages), stages=", ".join(stages))
        self._warn(f"{text}. {FIX}.")


"""SGLang Omni's pipeline facts from its log: admissions, rejections by reason, stage lifecycle, the
coordinator's in-flight cap and each stage's batch-ceiling proxy (``sglang_omni_*``).

Part of the scheduler state (:class:`~exporter.scheduler.state.SchedulerStates` holds one), written
through the store's ``apply`` like every scheduler fact and read through its snapshot. No lock and no
Prometheus import here. Lines and their sources: :mod:`exporter.sources.log.omni`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..events import (
    OMNI_REJECT_REASONS,
    CudaGraphCapture,
    OmniAdmission,
    OmniInFlightCap,
    OmniStageEvent,
    OmniStartup,
)

#: ``event`` values of the lifecycle counter.
LIFECYCLE = ("started", "stopped", "crashed")
#: Most stages tracked (an Omni pipeline has about ten; garbage names must not grow the series).
MAX_STAGES = 64


@dataclass(slots=True)
class PipelineState:
    """What SGLang Omni's log said about its pipeline (counts since the exporter started reading).

    Attributes:
        seen: An Omni pipeline line was read (the families stay empty for plain SGLang).
        submitted / aborted: Requests the coordinator submitted / aborted. ``submitted`` is ``None``
            (the series absent) until the first ``Coordinator submitted`` line: SGLang Omni prints it
            at DEBUG since 0.1.7, so at INFO a 0 beside dozens of admissions would be false.
        rejected: ``(stage, reason)`` -> rejected requests; ``stage`` is ``""`` for the coordinator's
            in-flight cap and for a stage process's line that names no stage (no shim).
        in_flight_cap: The coordinator's in-flight cap, or ``None`` when not printed.
        lifecycle: ``(stage, event)`` -> lifecycle lines, event in :data:`LIFECYCLE`.
        up: stage -> 1 after ``Stage X started``, 0 after it stopped or crashed.
        process_deaths: Stage processes the coordinator found dead.
        ceiling_proxy: stage -> the largest decode CUDA-graph batch size captured (a proxy of
            ``max_running_requests``, which Omni never prints).
    """

    seen: bool = False
    submitted: int | None = None
    aborted: int = 0
    rejected: dict[tuple[str, str], int] = field(default_factory=dict)
    in_flight_cap: int | None = None
    lifecycle: dict[tuple[str, str], int] = field(default_factory=dict)
    up: dict[str, int] = field(default_factory=dict)
    process_deaths: int = 0
    ceiling_proxy: dict[str, int] = field(default_factory=dict)

    def _room(self, stage: str) -> bool:
        """Whether a fact about ``stage`` may be kept (the pipeline's own, a known stage, or room for one
        more)."""
        if not stage:
            return True
        stages = {s for s, _ in self.lifecycle} | set(self.ceiling_proxy) | {s for s, _ in self.rejected}
        stages.discard("")
        return stage in stages or len(stages) < MAX_STAGES

    def apply(self, ev) -> bool:
        """Apply one pipeline event (:data:`~exporter.events.OMNI_PIPELINE_EVENTS`, or a stage's
        :class:`~exporter.events.CudaGraphCapture`); False when it names one stage too many
        (:data:`MAX_STAGES`). A start-up line only marks the log as an Omni log."""
        kind = type(ev)
        if not self.seen:
            self.seen = True
            for reason in OMNI_REJECT_REASONS:  # every reason's series exists from the first Omni line on
                self.rejected.setdefault(("", reason), 0)
        if kind is OmniStartup:
            return True
        if kind is OmniAdmission:
            if ev.action == "submitted":
                self.submitted = (self.submitted or 0) + 1
            elif ev.action == "aborted":
                self.aborted += 1
            else:
                stage = ev.origin.stage
                if not self._room(stage):
                    return False
                key = (stage, ev.reason)
                self.rejected[key] = self.rejected.get(key, 0) + 1
        elif kind is OmniStageEvent:
            if ev.event == "dead":
                self.process_deaths += ev.processes
                return True
            if not self._room(ev.stage):
                return False
            if not any(s == ev.stage for s, _ in self.lifecycle):
                for e in LIFECYCLE:
                    self.lifecycle.setdefault((ev.stage, e), 0)
            self.lifecycle[(ev.stage, ev.event)] += 1
            self.up[ev.stage] = 1 if ev.event == "started" else 0
        elif kind is OmniInFlightCap:
            self.in_flight_cap = ev.cap
        elif kind is CudaGraphCapture:
            stage = ev.origin.stage
            if not self._room(stage):
                return False
            self.ceiling_proxy[stage] = ev.max_batch_size
        return True

    def view(self) -> dict | None:
        """Plain copies for the collector; ``None`` before the first Omni pipeline line."""
        if not self.seen:
            return None
        return {
            "submitted": self.submitted,
            "aborted": self.aborted,
            "rejected": dict(self.rejected),
            "in_flight_cap": self.in_flight_cap,
            "lifecycle": dict(self.lifecycle),
            "up": dict(self.up),
            "process_deaths": self.process_deaths,
            "ceiling_proxy": dict(self.ceiling_proxy),
        }

"""A stage that runs requests but whose log says nothing: said once, never left silent.

SGLang Omni's ``/model_info`` names each SGLang-backed stage with its running batch; its scheduler
prints one ``Prefill batch`` line per batch at INFO. When ``/model_info`` shows a stage running
requests and, :data:`GRACE` seconds later, the log has given that stage no scheduler (and no line
went unattributed, which the attribution step already explains), every per-stage figure of the log
is missing, not zero: the exporter warns once per stage and names the causes it knows. Measured on
Omni 0.1.9 under ``sglang serve --model-type omni`` (SGLang 0.5.22): SGLang's command sets the root
logger up first at WARNING, Omni's own ``basicConfig(level=...)`` then does nothing and Omni hands
the root logger's level to its stages, so no stage prints an INFO line whatever ``--log-level`` says
(corpus 066). ``--log-level warning`` hides them as well.
"""

from __future__ import annotations

import logging
import time

log = logging.getLogger(__name__)

#: Seconds a stage may run requests before its first scheduler line is expected in the log.
GRACE = 30.0


class SilentStages:
    """Warns once per SGLang Omni stage that ``/model_info`` shows running but the log never names.

    Args:
        store: The scheduler state (:class:`~exporter.scheduler.store.SchedulerStore`): which stages
            the log has schedulers of.
        log_stats: The log source's statistics (``lines``: ``(kind, result)`` -> lines, under ``lock``).
        clock: Monotonic seconds, injectable for tests.
    """

    def __init__(self, store, log_stats, clock=time.monotonic):
        self._store, self._log_stats = store, log_stats
        self._clock = clock
        self._first_busy: dict[str, float] = {}
        self._warned: set[str] = set()

    def __call__(self, stages: dict[str, dict[str, int]] | None) -> list[str]:
        """The poller's hook after each ``/model_info`` answer: :meth:`check` against the log now."""
        if not stages:
            return []
        logged = {v.identity[0] for v in self._store.snapshot().schedulers}
        with self._log_stats.lock:
            unattributed = sum(n for (_, result), n in self._log_stats.lines.items() if result == "unattributed")
        return self.check(stages, logged, unattributed)

    def check(self, stages: dict[str, dict[str, int]] | None, logged: set[str], unattributed: float) -> list[str]:
        """Look at one poll's per-stage counts (``stages``: :func:`~.decode.model_info`), the stages
        the log has schedulers of (``logged``) and the log's unattributed lines; returns the stages
        warned about now."""
        if not stages or unattributed:
            return []
        now = self._clock()
        warned = []
        for stage, counts in stages.items():
            if stage in logged or stage in self._warned:
                continue
            if counts.get("running_batch_size", 0) > 0 or counts.get("waiting_queue_size", 0) > 0:
                self._first_busy.setdefault(stage, now)
            first = self._first_busy.get(stage)
            if first is not None and now - first >= GRACE:
                self._warned.add(stage)
                warned.append(stage)
                log.warning("SGLang Omni's /model_info showed stage %s running requests %.0f s ago, but the log "
                            "has no scheduler line of it: its per-stage figures are missing, not zero. The stage "
                            "logs below INFO: under 'sglang serve --model-type omni' (SGLang 0.5.22, Omni 0.1.9) "
                            "the stages log at WARNING whatever --log-level says (start Omni with "
                            "'sgl-omni serve --log-level info'), or Omni runs with --log-level warning; "
                            "or --log.path is not the file Omni's stdout goes to", stage, now - first)
        return warned

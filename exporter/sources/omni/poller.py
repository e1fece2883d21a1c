"""Polling SGLang Omni: a background thread reads ``/health`` and ``/model_info`` once per interval,
each cycle within a deadline, and keeps the latest snapshot with its age (like the GPU poller).

Rules (``docs/sglang-omni.md#live-snapshot``):

* A cycle has a deadline (``timeout``), shared by its two requests. A cycle that overruns (a hung
  connection, a name lookup that never returns) is counted as ``timeout``; no new cycle starts until
  it returns, and the snapshot goes stale.
* ``up`` is 1 while the latest ``/health`` answered 200 and the snapshot is fresh (younger than three
  intervals plus the deadline); the per-stage snapshot is served only while fresh and only from a
  ``/model_info`` of the latest cycle that answered.
* A scrape never waits for Omni: :meth:`OmniPoller.status` copies the snapshot under the lock.
* The admin key is read from a file (``--omni.admin-key-file``, re-read every cycle, so a rotated
  Secret is picked up) or from ``SGLANG_OMNI_ADMIN_KEY``, the variable Omni itself reads. It is never
  logged.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from ...files import read_small_file
from ...limits import DEFAULT_OMNI_POLL_INTERVAL, DEFAULT_OMNI_TIMEOUT
from . import decode
from .client import RESULTS, Answer, get_json

log = logging.getLogger(__name__)

#: The environment variable SGLang Omni reads its admin key from (``sglang_omni/http/admin_auth.py``).
ADMIN_KEY_ENV = "SGLANG_OMNI_ADMIN_KEY"
ENDPOINTS = ("health", "model_info")
_KEY_FILE_MAX_BYTES = 64 << 10


@dataclass(frozen=True)
class OmniStatus:
    """What the collector serves, copied under the poller's lock.

    Attributes:
        up: The latest ``/health`` answered 200 and the snapshot is fresh.
        health: The latest ``/health`` body read (``None`` while stale or before the first answer).
        stages: stage -> counts of the latest ``/model_info`` (``None`` while stale or unanswered).
        polls: ``(endpoint, result)`` -> polls since start.
        snapshot_age: Seconds since the latest cycle that got an answer, ``None`` before one.
    """

    up: bool
    health: decode.Health | None
    stages: dict[str, dict[str, int]] | None
    polls: dict[tuple[str, str], int]
    snapshot_age: float | None


class OmniPoller:
    """Polls SGLang Omni's ``/health`` and ``/model_info`` in a thread; see the module docstring.

    Args:
        url: Base URL of Omni's API server, e.g. ``http://127.0.0.1:8000``.
        poll_interval: Seconds between cycle starts.
        timeout: Deadline of one cycle in seconds (both requests).
        admin_key_file: File holding the admin key, or None to use :data:`ADMIN_KEY_ENV`.
        environ: Where :data:`ADMIN_KEY_ENV` is read (tests inject one).
        clock: Monotonic clock (seconds).
        fetch: The GET function (:func:`~.client.get_json`; tests may wrap it).
        on_stages: Called in the poller's thread with each cycle's per-stage counts
            (:func:`~.decode.model_info`) when ``/model_info`` answered, e.g. :class:`~.silence.SilentStages`.
    """

    def __init__(self, url: str, *, poll_interval: float = DEFAULT_OMNI_POLL_INTERVAL,
                 timeout: float = DEFAULT_OMNI_TIMEOUT, admin_key_file: str | None = None,
                 environ: dict[str, str] | None = None, clock: Callable[[], float] = time.monotonic,
                 fetch: Callable[..., Answer] = get_json,
                 on_stages: Callable[[dict[str, dict[str, int]]], object] | None = None):
        self.on_stages = on_stages
        self.base = url.rstrip("/")
        self.poll_interval = poll_interval
        self.timeout = timeout
        self.admin_key_file = admin_key_file
        self.environ = os.environ if environ is None else environ
        self.clock = clock
        self.fetch = fetch
        self.stale_after = 3 * poll_interval + timeout
        self.lock = threading.Lock()
        self.polls: dict[tuple[str, str], int] = {(e, r): 0 for e in ENDPOINTS for r in RESULTS}
        self.cycles = 0  # completed cycles (tests wait on it)
        self._health: decode.Health | None = None
        self._health_ok = False
        self._stages: dict[str, dict[str, int]] | None = None
        self._answered_at: float | None = None
        self._overrun = False
        self._said: dict[str, str] = {}  # endpoint -> the latest problem logged (each said once)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ threads

    def start(self) -> None:
        """Start the poller thread (daemon); the first cycle runs at once."""
        self._thread = threading.Thread(target=self._run, name="omni-poller", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        """Stop the thread (waits at most ``timeout`` s)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.is_set():
            started = self.clock()
            worker = threading.Thread(target=self.run_cycle, name="omni-cycle", daemon=True)
            worker.start()
            worker.join(self.timeout + 0.5)  # the requests time out by themselves; a name lookup may not
            if worker.is_alive():
                with self.lock:
                    self.polls[("health", "timeout")] += 1
                    self._overrun = True
                log.warning("SGLang Omni poll at %s exceeded its %.1f s deadline; serving a stale snapshot",
                            self.base, self.timeout)
                while worker.is_alive() and not self._stop.is_set():
                    worker.join(0.2)
            self._stop.wait(max(0.0, self.poll_interval - (self.clock() - started)))

    # ------------------------------------------------------------------ one cycle

    def admin_key(self) -> str | None:
        """The admin key: the file's first line when a file is set (None while it cannot be read),
        else :data:`ADMIN_KEY_ENV`."""
        if self.admin_key_file:
            try:
                text = read_small_file(self.admin_key_file, _KEY_FILE_MAX_BYTES).decode("utf-8", "replace")
            except (OSError, ValueError) as exc:
                self._say("model_info", f"cannot read --omni.admin-key-file {self.admin_key_file}: "
                                        f"{getattr(exc, 'strerror', None) or exc}")
                return None
            return text.strip().splitlines()[0].strip() if text.strip() else None
        return self.environ.get(ADMIN_KEY_ENV) or None

    def run_cycle(self) -> None:
        """One cycle: ``/health`` then ``/model_info`` within the deadline. Tests call it directly."""
        deadline = self.clock() + self.timeout
        h = self.fetch(f"{self.base}/health", self.timeout)
        left = max(0.05, deadline - self.clock())
        m = self.fetch(f"{self.base}/model_info", left, self.admin_key())
        health = decode.health(h.body) if h.body is not None else None
        stages = decode.model_info(m.body) if m.result == "ok" and m.body is not None else None
        m_result = "bad_response" if m.result == "ok" and stages is None else m.result
        with self.lock:
            self.polls[("health", h.result)] += 1
            self.polls[("model_info", m_result)] += 1
            self._health = health
            self._health_ok = h.result == "ok"
            self._stages = stages
            if health is not None or stages is not None:
                self._answered_at = self.clock()
            self._overrun = False
            self.cycles += 1
        self._report("health", h.result, h.detail)
        self._report("model_info", m_result, m.detail)
        if stages is not None and self.on_stages is not None:
            try:
                self.on_stages(stages)
            except Exception:  # a hook must not stop the polls
                log.warning("SGLang Omni poll hook failed", exc_info=True)

    def _report(self, endpoint: str, result: str, detail: str) -> None:
        if result == "ok":
            if self._said.pop(endpoint, None) is not None:
                log.info("SGLang Omni's /%s at %s answers again", endpoint, self.base)
            return
        hint = (f" (the admin key: set {ADMIN_KEY_ENV} or --omni.admin-key-file as on the Omni server)"
                if result == "unauthorized" else "")
        self._say(endpoint, f"SGLang Omni's /{endpoint} at {self.base}: {result}, {detail}{hint}")

    def _say(self, endpoint: str, text: str) -> None:
        """Log a problem once, until it changes or the endpoint answers again."""
        if self._said.get(endpoint) != text:
            self._said[endpoint] = text
            log.warning("%s", text)

    # ------------------------------------------------------------------ status

    def status(self) -> OmniStatus:
        """The latest snapshot and counters; never waits for Omni (safe at scrape time)."""
        with self.lock:
            age = None if self._answered_at is None else max(0.0, self.clock() - self._answered_at)
            fresh = not self._overrun and age is not None and age <= self.stale_after
            return OmniStatus(up=fresh and self._health_ok, health=self._health if fresh else None,
                              stages=dict(self._stages) if fresh and self._stages is not None else None,
                              polls=dict(self.polls), snapshot_age=age)


def make_poller(settings, on_stages=None) -> OmniPoller:
    """Build the poller from :class:`exporter.settings.OmniSettings` (``on_stages``: its hook)."""
    return OmniPoller(settings.url, poll_interval=settings.poll_interval, timeout=settings.timeout,
                      admin_key_file=settings.admin_key_file, on_stages=on_stages)

"""Helpers for the tailer scenario tests (tests/test_tail_*.py): a real follower on real files.

Every wait has a deadline and polls the exporter's own counters; nothing sleeps a fixed time to let
the tailer "catch up". ``settle()`` waits for two more complete passes of the follower over all its
files after a condition held, so a line read twice (or late) would still show up in the counts.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from conftest import CORPUS, samples
from prometheus_client import generate_latest

from exporter.cli import build_registry
from exporter.scheduler.state import SchedulerStates
from exporter.scheduler.store import SchedulerStore
from exporter.sources.log.source import LogSource

#: Seconds any single wait may take; generous because other test runs share the CPUs.
DEADLINE = float(os.environ.get("TAIL_TEST_DEADLINE", "30"))

#: Real ``Decode batch`` lines of a 2026 SGLang log (corpus 008), as bytes without terminator.
DECODE_LINES: list[bytes] = [
    line.encode() for line in (CORPUS / "008-retraction-storm-tokens-gained-uvicorn.log")
    .read_text(encoding="utf-8").splitlines() if "] Decode batch, #running-req" in line
]
#: Other real lines of the same log (prefill and retraction lines excluded), for mixing in.
OTHER_LINES: list[bytes] = [
    line.encode() for line in (CORPUS / "008-retraction-storm-tokens-gained-uvicorn.log")
    .read_text(encoding="utf-8").splitlines()
    if "batch" not in line and "etract" not in line and "max_total_num_tokens" not in line and line
][:20]
assert len(DECODE_LINES) >= 10 and OTHER_LINES


def decode_block(n: int, start: int = 0, sep: bytes = b"\n") -> bytes:
    """``n`` real Decode batch lines, each ended by ``sep``."""
    return b"".join(DECODE_LINES[(start + i) % len(DECODE_LINES)] + sep for i in range(n))


def append(path: Path | str, data: bytes) -> None:
    """Append bytes the way a logger does (O_APPEND, one write, closed)."""
    with open(path, "ab") as f:
        f.write(data)


class Harness:
    """The real log source for ``paths`` (tailers, ingest step, a running follower) and a registry.

    Args:
        paths: Paths and globs, as ``--log.path`` takes them.
        Others as the settings of the same name; the poll interval is short so tests run quickly,
        and ``poll_interval=5`` makes a test depend on file events. Further keywords go to
        :class:`LogSource` (``max_files_per_glob``, ``stall_after``).
    """

    def __init__(self, *paths, poll_interval: float = 0.05, watch_mode: str = "inotify",
                 rotate_wait: float = 0.3, from_beginning: bool = False, max_line_bytes: int = 1 << 20,
                 observer_factory=None, **kw):
        self.store = SchedulerStore(SchedulerStates(40))
        self.log = LogSource([str(p) for p in paths], self.store, from_beginning=from_beginning,
                             max_line_bytes=max_line_bytes, rotate_wait=rotate_wait, poll_interval=poll_interval,
                             watch_mode=watch_mode, observer_factory=observer_factory, **kw)
        self.sources = self.log.tailers
        self.follower = self.log.follower
        self.registry = build_registry(self.store, self.log, None)

    def __enter__(self) -> Harness:
        self.follower.start()
        self.wait(lambda: self.follower.cycles >= 1, "first pass of the follower")
        return self

    def __exit__(self, *exc) -> None:
        self.follower.stop()

    # -- reading the exporter's own counters ------------------------------------------------------

    def lines(self, kind: str = "decode", result: str = "parsed") -> int:
        with self.log.stats.lock:
            return self.log.stats.lines[(kind, result)]

    def total_lines(self) -> int:
        with self.log.stats.lock:
            return sum(self.log.stats.lines.values())

    def metrics(self) -> dict:
        return samples(generate_latest(self.registry).decode())

    def metric(self, name: str, **labels) -> float | None:
        return self.metrics().get((name, tuple(sorted(labels.items()))))

    # -- waiting ----------------------------------------------------------------------------------

    def wait(self, predicate, what: str, deadline: float = DEADLINE) -> None:
        end = time.monotonic() + deadline
        while not predicate():
            if time.monotonic() > end:
                raise AssertionError(f"timed out after {deadline}s waiting for {what}; decode parsed="
                                     f"{self.lines()}, lines={dict(self.log.stats.lines)}, "
                                     f"files={self.log.stats.files}")
            if not self.follower.is_alive():
                raise AssertionError("the follower thread died")
            time.sleep(0.005)

    def wait_decode(self, n: int, what: str = "") -> None:
        """Wait until exactly ``n`` decode lines are parsed, then settle and check it stays ``n``."""
        self.wait(lambda: self.lines() >= n, f"{n} parsed decode lines {what}")
        self.settle()
        assert self.lines() == n, f"expected exactly {n} parsed decode lines {what}, got {self.lines()}"

    def settle(self, passes: int = 2) -> None:
        """Wait until the follower has made ``passes`` more complete passes over every file."""
        target = self.follower.cycles + passes + 1  # +1: the pass in progress may have started earlier

        def done() -> bool:
            self.follower.wake()
            return self.follower.cycles >= target

        self.wait(done, f"{passes} more passes of the follower")

    def stats(self, path):
        return self.log.stats.files[str(path)]

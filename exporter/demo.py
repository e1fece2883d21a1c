"""Demo: replay the bundled sample log into a file at its recorded pace, so /metrics moves.

The sample (``exporter/data/sample.log``) is real SGLang output from the shared corpus (its header
names the source). Each line is written with its timestamp rewritten to the current time, after
sleeping the gap the original log shows between it and the previous line (capped, and divided by
``speed``). At the end the replay starts over, so counters keep growing like a live server's.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from importlib import resources
from pathlib import Path

from .sources.log.parser import parse_origin

log = logging.getLogger(__name__)

_STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)")


def sample_log_path() -> Path:
    """Path of the bundled sample log (a real file inside the installed package)."""
    return Path(str(resources.files("exporter") / "data" / "sample.log"))


def sample_lines() -> list[str]:
    """The sample log's lines, without its ``# `` header."""
    text = sample_log_path().read_text(encoding="utf-8")
    return [line for line in text.splitlines() if not line.startswith("# ")]


class Replayer:
    """Writes the sample log to ``dest`` in a background thread, forever or until stopped.

    Args:
        dest: File to append to (created).
        speed: Replay speed factor (2.0 = twice as fast as recorded).
        max_gap: Longest pause between two lines, in recorded seconds.
        loops: Number of passes over the sample; ``None`` loops until :meth:`stop`.
    """

    def __init__(self, dest: Path, speed: float = 1.0, max_gap: float = 2.0, loops: int | None = None):
        self.dest, self.speed, self.max_gap, self.loops = dest, speed, max_gap, loops
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="demo-replay", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        lines = sample_lines()
        passes = 0
        with open(self.dest, "a", encoding="utf-8") as out:
            while not self._stop.is_set() and (self.loops is None or passes < self.loops):
                prev: float | None = None
                for line in lines:
                    t = parse_origin(line[:22]).log_time if _STAMP.match(line) else None
                    if t is not None:
                        if prev is not None and t > prev:
                            if self._stop.wait(min(t - prev, self.max_gap) / self.speed):
                                return
                        prev = t
                        line = _STAMP.sub("[" + time.strftime("%Y-%m-%d %H:%M:%S"), line, count=1)
                    out.write(line + "\n")
                    out.flush()
                passes += 1
                log.info("demo: replayed the sample log %d time(s)", passes)

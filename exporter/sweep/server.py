"""One server start of a sweep: the user's command, its output to a log file, ready, stopped.

The command is started in a session of its own (so that SGLang's scheduler, tokenizer and detokenizer
processes stop with it) with stdout and stderr appended to the run's log (as ``2>&1 | tee`` would).
It is ready when the log shows :data:`READY_LINE`, the line SGLang prints once its own warm-up
request is done (every release since 2024); the HTTP port answering is not enough, the warm-up may
still run. Stopped with SIGINT (SGLang's clean shutdown), SIGKILL to the group after a grace period.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

#: What SGLang prints when it is ready to serve (``launch_server``, after its warm-up request).
READY_LINE = b"The server is fired up and ready to roll!"
#: Seconds a stopping server gets before SIGKILL.
STOP_GRACE = 30.0


class StartError(RuntimeError):
    """The server exited or did not get ready in time; the message ends with the log's last lines."""


class ServerProcess:
    """A server started from ``argv`` with its output appended to ``log``."""

    def __init__(self, argv: list[str], log: Path, env: dict[str, str] | None = None):
        self.argv, self.log, self.env = argv, log, env
        self.proc: subprocess.Popen | None = None
        self._from = 0

    def start(self, timeout: float, poll: float = 0.5) -> None:
        """Start and wait until ready.

        Raises:
            StartError: the process exited, or :data:`READY_LINE` did not come within ``timeout`` seconds
                (the server is stopped); the message holds the log's last lines.
            OSError: the command cannot be started (not found, not executable).
        """
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self._from = self.log.stat().st_size if self.log.exists() else 0
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env=self.env, start_new_session=True)
        deadline = time.monotonic() + timeout
        while True:
            if READY_LINE in self._written():
                return
            if self.proc.poll() is not None:
                raise StartError(f"the server exited with {self.proc.returncode} before it was ready; "
                                 f"its last log lines:\n{self.tail()}")
            if time.monotonic() > deadline:
                self.stop()
                raise StartError(f"the server was not ready after {timeout:g} s; its last log lines:\n{self.tail()}")
            time.sleep(poll)

    def _written(self) -> bytes:
        with open(self.log, "rb") as f:
            f.seek(self._from)
            return f.read()

    def tail(self, n: int = 20) -> str:
        """The last ``n`` lines this start wrote."""
        return b"\n".join(self._written().splitlines()[-n:]).decode("utf-8", "replace")

    def stop(self, grace: float = STOP_GRACE) -> None:
        """SIGINT to the server's process group, SIGKILL after ``grace`` seconds; waits for the exit."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGINT)
                self.proc.wait(grace)
            except ProcessLookupError:
                pass
            except subprocess.TimeoutExpired:
                pass
        try:  # SGLang's child processes must not outlive the run
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            pass

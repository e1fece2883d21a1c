"""A real SGLang server on the CPU: started with a scenario's flags, its output appended to a log
file (as ``2>&1 | tee -a`` would), its ``/metrics`` scraped, stopped with SIGTERM.

Everything the server runs is SGLang's own (scheduler, logging, metrics, forward-pass publisher);
the venv holds only the compute stand-ins of ``testbed/standins/`` (``docs/testbed.md``).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from . import stack

#: Flags every test bed server gets: the CPU, the tiny model with random weights, no grammar
#: backend (none is built for CPU), SGLang's default log level and its own ``/metrics``.
BASE_FLAGS = ("--load-format", "dummy", "--device", "cpu", "--attention-backend", "torch_native",
              "--grammar-backend", "none", "--log-level", "info", "--enable-metrics")
#: Environment every test bed server (and its benchmark client) gets: SGLang's CPU engine, no GPU, no hub.
ENV = {"SGLANG_USE_CPU_ENGINE": "1", "CUDA_VISIBLE_DEVICES": "", "HF_HUB_OFFLINE": "1",
       "TOKENIZERS_PARALLELISM": "false", "PYTHONUNBUFFERED": "1"}
#: Longest start-up (load, warm-up request) before the server is given up, seconds.
START_TIMEOUT = 300.0
#: The line SGLang prints once its warm-up request is done (every version the test bed runs).
READY_LINE = b"The server is fired up and ready to roll!"


def free_port() -> int:
    """A TCP port free on the loopback interface now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One SGLang server process.

    Args:
        version: SGLang release (a key of :data:`stack.RELEASES`), built by :func:`stack.build`.
        flags: The scenario's own flags, after :data:`BASE_FLAGS`.
        log: The log file; each start appends to it (a restart continues the same file).
        env: Environment variables of this start, on top of the test bed's.
    """

    def __init__(self, version: str, flags: list[str], log: Path, env: dict[str, str] | None = None):
        self.version, self.flags, self.log = version, list(flags), log
        self.env = dict(env or {})
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self._log_start = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    #: Seconds :meth:`start` waits for the server to get ready.
    start_timeout = START_TIMEOUT

    def what(self) -> str:
        """The server's name in messages."""
        return f"SGLang {self.version}"

    def command(self) -> list[str]:
        """The command line that starts the server."""
        return [str(stack.python(self.version)), "-m", "sglang.launch_server",
                "--model-path", str(stack.model_dir()), *BASE_FLAGS,
                "--host", "127.0.0.1", "--port", str(self.port), *self.flags]

    def ready(self) -> bool:
        """This start is ready: it has printed :data:`READY_LINE`."""
        return READY_LINE in self._this_run()

    def start(self, timeout: float | None = None) -> "Server":
        """Start the server and wait until it is :meth:`ready` (at most ``timeout`` seconds, default
        :attr:`start_timeout`).

        Raises:
            RuntimeError: it exited or did not get ready within ``timeout`` (the log's tail is in the message).
        """
        timeout = self.start_timeout if timeout is None else timeout
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self._log_start = self.log.stat().st_size if self.log.exists() else 0
        env = dict(os.environ, **ENV, **self.env)
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(self.command(), stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.what()} exited with {self.proc.returncode} at start-up:\n{self.tail()}")
            if self.ready():
                return self
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"{self.what()} not ready after {timeout:.0f} s:\n{self.tail()}")

    def _this_run(self) -> bytes:
        with open(self.log, "rb") as f:
            f.seek(self._log_start)
            return f.read()

    def tail(self, n: int = 40) -> str:
        """The last ``n`` lines this run wrote."""
        return b"\n".join(self._this_run().splitlines()[-n:]).decode(errors="replace")

    def metrics(self) -> str:
        """SGLang's own ``/metrics`` text now."""
        with urllib.request.urlopen(f"{self.url}/metrics", timeout=30) as r:
            return r.read().decode()

    def stop(self, timeout: float = 60.0) -> None:
        """SIGTERM to the server's process group, SIGKILL after ``timeout``; waits for the exit."""
        if self.proc is None or self.proc.poll() is not None:
            return
        for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 10.0)):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.proc.wait(wait)
                break
            except subprocess.TimeoutExpired:
                continue
        # children of the group (tokenizer, detokenizer, scheduler) must not outlive the test
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def __enter__(self) -> "Server":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def get_json(url: str, timeout: float = 30.0):
    """GET ``url`` and decode its JSON body."""
    import json

    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read())


def post_json(url: str, body: dict, timeout: float = 300.0):
    """POST ``body`` as JSON to ``url`` and decode the JSON answer (raises on an HTTP error)."""
    import json

    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        raise RuntimeError(f"{url}: HTTP {e.code}: {e.read()[:300]!r}") from e

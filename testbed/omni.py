"""A real SGLang Omni pipeline on the CPU: the tiny Qwen3-Omni served by ``sgl-omni serve``, text
requests with and without audio out, Omni's ``/model_info`` polled during the load.

Everything the pipeline runs is Omni's and SGLang's own (stages, schedulers, logging, HTTP API);
the stack's venv holds only the compute stand-ins of ``testbed/standins/`` (``docs/testbed.md``).
With ``shim=True`` the project's logging shim (``deploy/sglang-omni/sitecustomize.py``) is on the
pipeline's ``PYTHONPATH``, as ``docs/sglang-omni.md`` tells a deployment to do.

A run keeps, under its output folder: ``server.log`` (everything the pipeline printed, stdout and
stderr), ``model-info.jsonl`` (each ``/model_info`` answer with the time and the log's size when it
came), ``client.jsonl`` (one line per request: audio asked, HTTP status, audio bytes) and ``run.json``.
"""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from . import stack
from .server import Server, post_json

ROOT = Path(__file__).resolve().parent.parent
SHIM = ROOT / "deploy" / "sglang-omni"
#: The Omni stack of the test bed.
VERSION = "omni-0.1.9"
#: What every start gets: the CPU (``docs/testbed.md``: a fixed static memory fraction, the thinker's
#: automatic one comes out negative on a CPU), the plain-PyTorch attention, a small KV pool and every
#: decode pass logged, on both SGLang-backed stages.
BASE_FLAGS = ("--log-level", "info", "--mem-fraction-static", "0.3",
              "--thinker.engine.attention_backend", "torch_native",
              "--talker_ar.engine.attention_backend", "torch_native",
              "--thinker.engine.max_total_tokens", "4096", "--talker_ar.engine.max_total_tokens", "4096",
              "--thinker.engine.decode_log_interval", "1", "--talker_ar.engine.decode_log_interval", "1")
#: Longest start-up (seven stages, Omni's own warm-up request) before the pipeline is given up, seconds.
START_TIMEOUT = 420.0
#: Seconds between polls of ``/model_info`` during the load.
POLL_EVERY = 1.0
#: Words of the test bed tokenizer's vocabulary (``testbed/omni_model.py``): prompts stay in it.
WORDS = "please tell me about the scheduler batch decode prefill token cache audio speech stage".split()


#: How the pipeline is started: Omni's own command, or SGLang's (0.5.21+) handing over to it.
LAUNCHERS = {"sgl-omni": ("sgl-omni", "serve"), "sglang": ("sglang", "serve", "--model-type", "omni")}


_STATS_LINE = re.compile(r"^\S+ \S+ \[INFO\] \[stage-(?P<stage>[\w.-]+)/(?P<thread>[\w.-]+)\] \S+: "
                         r"(?P<kind>Prefill batch|Decode batch|KV Cache is allocated)\.?,? (?P<rest>.*)$")


@dataclass
class HandCount:
    """What the finished log says, counted here line by line: per stage, Prefill lines, the sum of
    their ``#new-seq``, Decode lines and the ``#tokens`` of its ``KV Cache is allocated`` line."""

    prefill: Counter = field(default_factory=Counter)
    admitted: Counter = field(default_factory=Counter)
    decode: Counter = field(default_factory=Counter)
    kv_tokens: dict = field(default_factory=dict)
    scheduler_lines: int = 0   # Prefill and Decode lines, shim or not


def hand_count(text: str) -> HandCount:
    """The finished log's :class:`HandCount` (the tests' and ``python3 -m testbed figures``' reference)."""
    h = HandCount()
    for line in text.splitlines():
        if ": Prefill batch, " in line or ": Decode batch, " in line:
            h.scheduler_lines += 1
        m = _STATS_LINE.match(line)
        if not m:
            continue
        stage, kind, rest = m["stage"], m["kind"], m["rest"]
        if kind == "Prefill batch":
            h.prefill[stage] += 1
            h.admitted[stage] += int(re.search(r"#new-seq: (\d+)", rest)[1])
        elif kind == "Decode batch":
            h.decode[stage] += 1
        else:
            h.kv_tokens[stage] = int(re.search(r"#tokens: (\d+)", rest)[1])
    return h



class OmniServer(Server):
    """One pipeline of the tiny Qwen3-Omni (its ``stop`` is :class:`Server`'s).

    Args:
        log: The log file; each start appends to it.
        shim: Put the logging shim on the pipeline's ``PYTHONPATH``.
        flags: Omni flags after :data:`BASE_FLAGS`.
        port: Its API port (default: a free one).
        launcher: A key of :data:`LAUNCHERS`: ``sgl-omni serve`` or ``sglang serve --model-type omni``.
    """

    def __init__(self, log: Path, shim: bool, flags: tuple[str, ...] = (), port: int | None = None,
                 launcher: str = "sgl-omni"):
        env = {"PYTHONPATH": str(SHIM)} if shim else {}
        super().__init__(VERSION, list(flags), log, env)
        self.shim, self.launcher = shim, LAUNCHERS[launcher]
        if port is not None:
            self.port = port

    start_timeout = START_TIMEOUT

    def what(self) -> str:
        return "SGLang Omni"

    def command(self) -> list[str]:
        """The launcher on the tiny Qwen3-Omni with :data:`BASE_FLAGS` and this start's flags."""
        program, *sub = self.launcher
        return [str(stack.venv_dir(VERSION) / "bin" / program), *sub, "--model-path", str(stack.omni_model_dir()),
                "--host", "127.0.0.1", "--port", str(self.port), *BASE_FLAGS, *self.flags]

    def ready(self) -> bool:
        """``/health`` answers 200: Omni's own warm-up request has crossed the pipeline."""
        return self.get("/health", timeout=5.0)[0] == 200

    def get(self, path: str, timeout: float = 30.0) -> tuple[int, dict | None]:
        """``GET path``: (HTTP status, JSON body or None); status 0 when nothing answers."""
        try:
            with urllib.request.urlopen(f"{self.url}{path}", timeout=timeout) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, None
        except (OSError, ValueError):
            return 0, None


@dataclass(frozen=True)
class OmniLoad:
    """``n`` chat requests of a few words, ``concurrency`` at a time; every ``audio_every``-th asks
    for audio out too (``modalities: ["text", "audio"]``), the rest text only. Each answer holds at
    most ``max_tokens`` text tokens and ``talker_tokens`` codec frames (Omni's
    ``talker_max_new_tokens``, 4096 by default): the random model rarely stops before."""

    n: int = 8
    concurrency: int = 4
    audio_every: int = 2
    max_tokens: int = 12
    talker_tokens: int = 24
    seed: int = 28


@dataclass
class OmniRun:
    """The records of one run (paths under :attr:`out`)."""

    out: Path
    shim: bool
    requests: list[dict] = field(default_factory=list)      # per request: audio, status, audio_bytes
    model_info: list[dict] = field(default_factory=list)    # per poll: t, log_size, status, body
    started: float = 0.0
    ready: float = 0.0
    stopped: float = 0.0

    @property
    def log(self) -> Path:
        return self.out / "server.log"


def run(out: Path, shim: bool, load: OmniLoad = OmniLoad(), flags: tuple[str, ...] = (),
        on_poll=None, port: int | None = None, launcher: str = "sgl-omni") -> OmniRun:
    """Start the pipeline, send ``load``, poll ``/model_info`` every :data:`POLL_EVERY` seconds while
    it runs (and once at the end, the pipeline idle), stop it with SIGTERM; records under ``out``.

    Args:
        on_poll: called as ``(poll record)`` right after each ``/model_info`` answer (the record's
            ``label``: ``ready``, ``load`` or ``end``, the pipeline idle), so that a test can scrape the
            sidecar at the same moment; the pipeline runs until it returns.
        port: The pipeline's API port (default: a free one), e.g. to give a sidecar beforehand.
        launcher: How it is started (:data:`LAUNCHERS`).

    Raises:
        RuntimeError: the pipeline failed to start (with the log's tail).
    """
    out.mkdir(parents=True, exist_ok=True)
    for old in ("server.log", "model-info.jsonl", "client.jsonl", "run.json"):
        (out / old).unlink(missing_ok=True)
    rec = OmniRun(out, shim)
    server = OmniServer(out / "server.log", shim, flags, port, launcher)
    rec.started = time.time()
    with server:
        rec.ready = time.time()

        def poll(label: str = "load") -> None:
            status, body = server.get("/model_info")
            entry = {"label": label, "t": time.time(), "log_size": rec.log.stat().st_size, "status": status,
                     "body": body}
            rec.model_info.append(entry)
            if on_poll:
                on_poll(entry)

        poll("ready")
        done = threading.Event()

        def poller() -> None:
            while not done.wait(POLL_EVERY):
                poll()

        th = threading.Thread(target=poller, daemon=True)
        th.start()
        try:
            _send(server, load, rec)
        finally:
            done.set()
            th.join()
        time.sleep(2.0)  # the last stats lines reach the log
        poll("end")
    rec.stopped = time.time()
    with open(out / "model-info.jsonl", "w") as f:
        f.writelines(json.dumps(e) + "\n" for e in rec.model_info)
    with open(out / "client.jsonl", "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in rec.requests)
    (out / "run.json").write_text(json.dumps({"version": VERSION, "shim": shim, "launcher": " ".join(server.launcher),
                                              "flags": [*BASE_FLAGS, *flags],
                                              "load": load.__dict__, "started": rec.started, "ready": rec.ready,
                                              "stopped": rec.stopped}, indent=1))
    return rec


def _send(server: OmniServer, load: OmniLoad, rec: OmniRun) -> None:
    """The load's requests through Omni's OpenAI chat API, ``load.concurrency`` threads."""
    import random

    rng = random.Random(load.seed)
    jobs = [(i, i % load.audio_every == 0, " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 10))))
            for i in range(load.n)]
    lock = threading.Lock()

    def worker() -> None:
        while True:
            with lock:
                if not jobs:
                    return
                i, audio, prompt = jobs.pop(0)
            body = {"model": "tiny", "messages": [{"role": "user", "content": prompt}],
                    "max_tokens": load.max_tokens, "temperature": 0.0, "seed": load.seed + i,
                    "modalities": ["text", "audio"] if audio else ["text"]}
            if audio:
                body.update(audio={"format": "wav"}, talker_max_new_tokens=load.talker_tokens)
            entry = {"i": i, "audio": audio}
            try:
                answer = post_json(f"{server.url}/v1/chat/completions", body, timeout=600.0)
                msg = (answer.get("choices") or [{}])[0].get("message") or {}
                entry.update(status=200, audio_bytes=len(((msg.get("audio") or {}).get("data")) or ""))
            except Exception as exc:  # kept in the records: a test asserts every request succeeded
                entry.update(status=str(exc)[:300])
            with lock:
                rec.requests.append(entry)

    threads = [threading.Thread(target=worker) for _ in range(load.concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

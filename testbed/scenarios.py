"""The test bed's scenarios: which flags a real SGLang server starts with and what load it gets.

A scenario is one or more starts of a server appending to one log (several starts: a restart).
:meth:`Scenario.run` keeps, under its output folder:

* ``server.log``: everything the server printed (stdout and stderr), every start appended;
* ``sglang-metrics/<start>-ready.prom`` / ``-end.prom`` / ``-tNNN.prom``: SGLang's own ``/metrics``
  when the server was ready (after its warm-up request), at the end of the load, and every
  :data:`SCRAPE_EVERY` seconds in between;
* ``fpm.jsonl``: the per-forward-pass stream as received (scenarios with the stream);
* ``client.jsonl``: the benchmark client's result, one JSON object per start;
* ``run.json``: version, flags, times of each start.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from . import load as load_mod
from . import stack
from .load import Load
from .server import Server

HERE = Path(__file__).resolve().parent
#: Seconds between scrapes of SGLang's ``/metrics`` during a load.
SCRAPE_EVERY = 3.0
#: The stream's name, relative to the output folder (SGLang appends ``.<dp_rank>``).
FPM_NAME = "fpm"


@dataclass(frozen=True)
class Start:
    """One server start: its flags (``{fpm}`` is replaced by the stream's ``ipc://`` name), its load
    and environment variables of its own: ``(name, value, since)``, set for SGLang releases from
    ``since`` on (0.5.18 refuses the CPU binding that 0.5.23 requires for two ranks)."""

    flags: tuple[str, ...]
    load: Load
    env: tuple[tuple[str, str, str], ...] = ()

    def env_for(self, version: str) -> dict[str, str]:
        """The variables that apply to ``version``."""
        key = lambda v: tuple(int(x) for x in v.split("."))  # noqa: E731
        return {name: value for name, value, since in self.env if key(version) >= key(since)}


@dataclass(frozen=True)
class Scenario:
    """A scenario of the issue "A real SGLang server in CI" (``docs/testbed.md`` lists them)."""

    name: str
    doc: str
    starts: tuple[Start, ...]
    fpm_ranks: int = 0  # DP ranks whose stream is recorded (0: no stream)

    def run(self, out: Path, version: str = stack.NEWEST,
            on_scrape: Callable[[int, str, str, Callable[[], str]], None] | None = None,
            before_start: Callable[[int, Server], None] | None = None) -> "Run":
        """Run every start in turn and keep the records under ``out`` (emptied first).

        Args:
            on_scrape: called as ``(start index, label, SGLang's /metrics text, again)`` right after
                each scrape, so that a test can scrape the sidecar at the same moment; ``again()``
                scrapes SGLang once more (to bracket the sidecar's scrape between two of SGLang's).
            before_start: called before each server starts (the sidecar may already follow the log).

        Raises:
            RuntimeError: a server or the client failed (with the log's tail).
        """
        out.mkdir(parents=True, exist_ok=True)
        for old in ("server.log", "fpm.jsonl", "client.jsonl", "run.json"):
            (out / old).unlink(missing_ok=True)
        prom = out / "sglang-metrics"
        prom.mkdir(exist_ok=True)
        for old in prom.glob("*.prom"):
            old.unlink()
        run = Run(out, self, version)
        recorder = None
        if self.fpm_ranks:
            endpoints = [f"{self.fpm_endpoint(out)}.{r}" for r in range(self.fpm_ranks)]
            recorder = subprocess.Popen([str(stack.python(version)), str(HERE / "fpm_record.py"),
                                         str(out / "fpm.jsonl"), *endpoints],
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            recorder.stdout.readline()  # "recording": subscribed before the server binds
        try:
            for i, start in enumerate(self.starts):
                flags = [f.replace("{fpm}", self.fpm_endpoint(out)) for f in start.flags]
                server = Server(version, flags, out / "server.log", start.env_for(version))
                if before_start:
                    before_start(i, server)
                t0 = time.time()
                with server:
                    ready = time.time()

                    def scrape(label: str) -> None:
                        text = server.metrics()
                        (prom / f"{i}-{label}.prom").write_text(text)
                        if on_scrape:
                            on_scrape(i, label, text, server.metrics)

                    scrape("ready")
                    done = threading.Event()

                    def ticker() -> None:
                        k = 0
                        while not done.wait(SCRAPE_EVERY):
                            k += 1
                            try:
                                scrape(f"t{k:03d}")
                            except Exception:  # a scrape that fails mid-load is skipped
                                pass

                    th = threading.Thread(target=ticker, daemon=True)
                    th.start()
                    try:
                        result = load_mod.run(start.load, server, out / "client.jsonl")
                    finally:
                        done.set()
                        th.join()
                    time.sleep(1.0)  # the last stats lines of the load reach the log
                    scrape("end")
                run.starts.append({"flags": flags, "started": t0, "ready": ready, "stopped": time.time(),
                                   "result": {k: result.get(k) for k in ("completed", "duration", "mean_tpot_ms",
                                                                            "mean_ttft_ms", "request_throughput")}})
        finally:
            if recorder is not None:
                recorder.terminate()
                recorder.wait(30)
            (out / "run.json").write_text(json.dumps({"scenario": self.name, "version": version,
                                                      "starts": run.starts}, indent=1))
        return run

    @staticmethod
    def fpm_endpoint(out: Path) -> str:
        """The stream's name flag value for a run under ``out``."""
        return f"ipc://{out.resolve() / FPM_NAME}"


@dataclass
class Run:
    """The records of one scenario run (paths under :attr:`out`)."""

    out: Path
    scenario: Scenario
    version: str
    starts: list[dict] = field(default_factory=list)

    @property
    def log(self) -> Path:
        return self.out / "server.log"

    def prom(self, start: int, label: str) -> str:
        """SGLang's ``/metrics`` text of a start at a label (``ready``, ``end``, ``t001``...)."""
        return (self.out / "sglang-metrics" / f"{start}-{label}.prom").read_text()

    def client(self) -> list[dict]:
        """The client's result of each start."""
        return [json.loads(x) for x in (self.out / "client.jsonl").read_text().splitlines() if x.strip()]


#: KV pressure: a small pool, requests that stop at EOS, a scheduler that admits eagerly.
_KV_PRESSURE = ("--max-total-tokens", "3000", "--max-running-requests", "32",
                "--schedule-conservativeness", "0.05")
_STEADY = Load(num_prompts=60, input_len=200, output_len=100, rate=4.0, seed=1)

SCENARIOS: dict[str, Scenario] = {s.name: s for s in (
    # (a) then (f): steady load at SGLang's default decode log interval, then a restart with other
    # settings whose output continues the same log
    Scenario("steady-restart", "(a) SGLang's default decode log interval (40) under steady Poisson load; "
             "(f) the server restarted with other settings, the new run appending to the same log",
             (Start(("--max-total-tokens", "20000", "--max-running-requests", "16"), _STEADY),
              Start(("--max-total-tokens", "6000", "--max-running-requests", "8", "--decode-log-interval", "5",
                     "--chunked-prefill-size", "1024"),
                    Load(num_prompts=30, input_len=200, output_len=100, rate=4.0, seed=5)))),
    # (b) and (c): KV pressure with retractions, every decode step logged and streamed
    Scenario("kv-pressure", "(b) KV pressure with retractions; (c) --decode-log-interval 1 with the "
             "per-forward-pass stream",
             (Start(_KV_PRESSURE + ("--decode-log-interval", "1", "--enable-forward-pass-metrics",
                                    "--forward-pass-metrics-ipc-name", "{fpm}"),
                    Load(num_prompts=120, input_len=200, output_len=200, rate=float("inf"), seed=2)),),
             fpm_ranks=1),
    # SGLang 0.5.23's CPU engine binds each rank to a NUMA node unless told which cores each gets
    Scenario("dp2", "(d) --dp-size 2: two schedulers, one log",
             (Start(("--dp-size", "2", "--max-total-tokens", "20000", "--max-running-requests", "16",
                     "--decode-log-interval", "5"),
                    Load(num_prompts=30, input_len=200, output_len=60, rate=4.0, seed=6),
                    env=(("SGLANG_CPU_OMP_THREADS_BIND", "0|1", "0.5.23"),)),)),
    # issue 26: SGLang counts retractions and decode passes on every TP rank; the rules take one copy
    Scenario("tp2", "(g) --tp-size 2 under KV pressure: two TP ranks, one scheduler, retractions",
             (Start(("--tp-size", "2") + _KV_PRESSURE + ("--decode-log-interval", "5"),
                    Load(num_prompts=60, input_len=200, output_len=200, rate=8.0, seed=4),
                    env=(("SGLANG_CPU_OMP_THREADS_BIND", "0|1", "0.5.23"),)),)),
    Scenario("priority", "(e) --enable-priority-scheduling, requests of two priorities",
             (Start(("--enable-priority-scheduling", "--max-total-tokens", "3000", "--max-running-requests", "8",
                     "--decode-log-interval", "5"),
                    Load(num_prompts=40, input_len=200, output_len=100, rate=6.0, seed=3, priorities=(0, 10))),)),
    # issue 34: a ceiling of 2 running requests and priorities 20 apart (threshold 10): a request of
    # priority 20 that finds both places held by priority 0 preempts one, whatever the machine's speed
    Scenario("priority-preemption", "issue 34: --enable-priority-scheduling with priorities 0 and 20 and a ceiling "
             "of 2: priority preemptions, which print no line",
             (Start(("--enable-priority-scheduling", "--max-total-tokens", "20000", "--max-running-requests", "2",
                     "--decode-log-interval", "5"),
                    Load(num_prompts=24, input_len=200, output_len=100, rate=8.0, seed=13, priorities=(0, 20))),)),
    # issue 34: mixed chunks under KV pressure (corpus 070; run by hand): a retracted request is admitted
    # again, and its earlier chunks evicted later are computed again beyond #new_tokens_gained
    Scenario("mixed-kv", "issue 34: --enable-mixed-chunk with chunked prompts under KV pressure",
             (Start(("--enable-mixed-chunk", "--chunked-prefill-size", "256") + _KV_PRESSURE
                    + ("--decode-log-interval", "5"),
                    Load(num_prompts=40, input_len=600, output_len=150, rate=8.0, seed=16)),)),
    # issue 34: chunked prompts under KV pressure with the stream on. Prompts of 1,140-1,200 tokens (5
    # chunks of 256) and 475-500 output tokens sent at once: a pool of 3,000 tokens admits two (a third
    # prompt does not fit beside them), prefill runs before decode, and two prompts plus 360 steps of
    # two requests outgrow the pool before either finishes: a retraction whatever the machine's speed.
    # The retracted request's earlier chunks stay in the radix cache (not in #new_tokens_gained) and
    # are evicted before it is admitted again
    Scenario("chunked-recompute", "issue 34: --chunked-prefill-size 256, prompts of 1,140-1,200 tokens under KV "
             "pressure, the per-forward-pass stream on: recompute between the log's and the stream's bounds",
             (Start(("--chunked-prefill-size", "256") + _KV_PRESSURE
                    + ("--decode-log-interval", "5", "--enable-forward-pass-metrics",
                       "--forward-pass-metrics-ipc-name", "{fpm}"),
                    Load(num_prompts=6, input_len=1200, output_len=500, rate=float("inf"), range_ratio=0.95,
                         seed=17)),),
             fpm_ranks=1),
    # issue 34: the stream's sum_prefill_kv_tokens by release (0.5.18-0.5.21: the whole KV after the
    # pass; 0.5.22+: the cached prefix at schedule time), against SGLang's prefill_cache counter
    Scenario("fpm-prefill", "issue 34: the per-forward-pass stream's prefill fields by release, light load",
             (Start(("--max-total-tokens", "20000", "--max-running-requests", "8", "--decode-log-interval", "5",
                     "--enable-forward-pass-metrics", "--forward-pass-metrics-ipc-name", "{fpm}"),
                    Load(num_prompts=16, input_len=200, output_len=20, rate=4.0, seed=15)),),
             fpm_ranks=1),
    # issue 34: --enable-mixed-chunk with prompts of several chunks: continuing chunks ride in decode
    # batches with a budget of chunked_prefill_size - #running-req tokens. The 30 requests are sent at
    # once to a ceiling of 8, so 22 wait whatever the machine's speed (at 4/s a fast machine kept the
    # queue empty: SGLang's mean wait 0.3 ms on 0.5.18, below what the log's 1-s stamps can see)
    Scenario("mixed-chunk", "issue 34: --enable-mixed-chunk, --chunked-prefill-size 256, prompts of 600 tokens",
             (Start(("--enable-mixed-chunk", "--chunked-prefill-size", "256", "--max-total-tokens", "20000",
                     "--max-running-requests", "8", "--decode-log-interval", "5"),
                    Load(num_prompts=30, input_len=600, output_len=60, rate=float("inf"), seed=14)),)),
)}

#: The method's experiment (docs/method.md): one sweep of ``--max-running-requests`` under the same
#: Poisson load and the same small KV pool, so that the largest ceilings are KV-bound and retract.
SWEEP_CEILINGS = (4, 8, 16, 32)
_SWEEP_LOAD = Load(num_prompts=40, input_len=200, output_len=200, rate=8.0, seed=7)
SCENARIOS.update({f"sweep-{n}": Scenario(
    f"sweep-{n}", f"the method's sweep (sglang-exporter compare): --max-running-requests {n} under the sweep's "
    "Poisson load, KV pool of 3000 tokens",
    (Start(("--max-total-tokens", "3000", "--schedule-conservativeness", "0.05", "--decode-log-interval", "1",
            "--max-running-requests", str(n)), _SWEEP_LOAD),)) for n in SWEEP_CEILINGS})

#: SGLang's request log (issue 37, ``sglang-exporter traffic``): the same Poisson load logged at level 1,
#: first in SGLang's text format, then in its JSON format, the client keeping each request's lengths.
_REQUEST_LOAD = Load(num_prompts=40, input_len=200, output_len=60, rate=4.0, seed=11, details=True)
SCENARIOS["request-log"] = Scenario(
    "request-log", "SGLang's request log at level 1 (--log-requests), text then JSON format, with the client's "
    "per-request lengths (--output-details)",
    (Start(("--log-requests", "--log-requests-level", "1", "--max-total-tokens", "20000",
            "--max-running-requests", "16", "--decode-log-interval", "5"), _REQUEST_LOAD),
     Start(("--log-requests", "--log-requests-level", "1", "--log-requests-format", "json", "--max-total-tokens",
            "20000", "--max-running-requests", "16", "--decode-log-interval", "5"), _REQUEST_LOAD)))

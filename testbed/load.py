"""Load for a test bed server: SGLang's own benchmark client (Poisson arrivals), or, for priority
classes (which that client cannot send), plain ``/generate`` requests with a ``priority`` field."""

from __future__ import annotations

import json
import os
import random
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from . import stack
from .server import Server, post_json


@dataclass(frozen=True)
class Load:
    """One load: ``num_prompts`` requests of random token ids, Poisson arrivals at ``rate`` per second.

    Attributes:
        input_len / output_len / range_ratio: SGLang's ``random-ids`` lengths (each drawn from
            ``[len * range_ratio, len]``).
        eos: requests may stop at EOS (``--disable-ignore-eos``): SGLang then reserves less than
            ``max_new_tokens`` per request and retracts under KV pressure.
        priorities: with it, the test bed's own client sends each request with a priority drawn from
            these values in turn (SGLang's benchmark client sends none).
        details: the client's ``--output-details`` (per-request ``input_lens``, ``output_lens``, ``ttfts``
            in the result file).
        trace: a trace file the client replays (``--dataset-name mooncake --dataset-path TRACE``: its
            arrival times and lengths) instead of ``random-ids`` at ``rate``; ``num_prompts`` bounds it.
    """

    num_prompts: int
    input_len: int
    output_len: int
    rate: float
    range_ratio: float = 0.5
    seed: int = 1
    eos: bool = True
    priorities: tuple[int, ...] = ()
    details: bool = False
    trace: str | None = None


def run(load: Load, server: Server, result: Path) -> dict:
    """Drive ``server`` with ``load``; the result (one JSON object, SGLang's benchmark fields) is
    appended to ``result`` and returned.

    Raises:
        subprocess.CalledProcessError / RuntimeError: the client failed.
    """
    if load.priorities:
        return _priority_client(load, server, result)
    cmd = [str(stack.python(server.version)), "-m", "sglang.benchmark.serving", "--backend", "sglang",
           "--host", "127.0.0.1", "--port", str(server.port), "--num-prompts", str(load.num_prompts),
           "--seed", str(load.seed), "--output-file", str(result)]
    if load.trace:
        cmd += ["--dataset-name", "mooncake", "--dataset-path", load.trace]
    else:
        cmd += ["--dataset-name", "random-ids", "--tokenize-prompt", "--random-input-len", str(load.input_len),
                "--random-output-len", str(load.output_len), "--random-range-ratio", str(load.range_ratio),
                "--request-rate", str(load.rate)]
    if load.eos:
        cmd.append("--disable-ignore-eos")
    if load.details:
        cmd.append("--output-details")
    before = result.stat().st_size if result.exists() else 0
    out = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, HF_HUB_OFFLINE="1"))
    if out.returncode != 0:
        raise RuntimeError(f"benchmark client failed ({out.returncode}):\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    with open(result) as f:
        f.seek(before)
        lines = [line for line in f.read().splitlines() if line.strip()]
    return json.loads(lines[-1])


def _priority_client(load: Load, server: Server, result: Path) -> dict:
    """Poisson arrivals of ``/generate`` requests with ``priority`` set; per-request TTFT is not
    measured (non-streaming), E2E latency is, per priority."""
    rng = random.Random(load.seed)
    lat: dict[int, list[float]] = {p: [] for p in load.priorities}
    errors: list[str] = []
    threads = []

    def one(priority: int, ids: list[int], out_len: int) -> None:
        t0 = time.monotonic()
        try:
            post_json(f"{server.url}/generate", {
                "input_ids": ids, "priority": priority,
                "sampling_params": {"max_new_tokens": out_len, "temperature": 0.0, "ignore_eos": not load.eos}})
            lat[priority].append(time.monotonic() - t0)
        except Exception as exc:  # kept, reported in the result
            errors.append(f"{type(exc).__name__}: {exc}"[:300])

    start = time.monotonic()
    for i in range(load.num_prompts):
        n_in = rng.randint(int(load.input_len * load.range_ratio), load.input_len)
        n_out = rng.randint(max(1, int(load.output_len * load.range_ratio)), load.output_len)
        ids = [rng.randint(5, 350) for _ in range(n_in)]
        t = threading.Thread(target=one, args=(load.priorities[i % len(load.priorities)], ids, n_out))
        t.start()
        threads.append(t)
        time.sleep(rng.expovariate(load.rate))
    for t in threads:
        t.join(600)
    doc = {"backend": "testbed-priority", "completed": sum(map(len, lat.values())), "errors": errors,
           "duration": time.monotonic() - start,
           "e2e_latency_s": {str(p): sorted(v) for p, v in lat.items()}}
    with open(result, "a") as f:
        f.write(json.dumps(doc) + "\n")
    return doc

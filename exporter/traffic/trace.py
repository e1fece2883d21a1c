"""A trace that SGLang's own benchmark client replays: ``python -m sglang.benchmark.serving --backend
sglang --dataset-name mooncake --dataset-path TRACE`` (``sglang/benchmark/datasets/mooncake.py``).

One JSON object per line and request: ``timestamp`` (milliseconds from the first request; the client
sends each request at its time, ``--mooncake-slowdown-factor`` stretches them, ``--request-rate`` is
ignored), ``input_length``, ``output_length`` (the client's ``max_new_tokens``) and ``hash_ids``. The
client does not read ``input_length``: it builds each prompt from ``hash_ids``, about
``block_tokens`` tokens per id (the id and 128 words ``hi`` each); so each request gets
``round(input_length / block_tokens)`` ids of its own (at least one, none shared between requests:
no common prefix beyond the chat template). The prompt's exact length depends on the model's
tokenizer; ``input_length`` keeps the modelled value.

Two ways (:func:`recorded`, :func:`poisson`): the arrivals as recorded, or the method's way, Poisson
arrivals at a chosen rate with each request's (input, output) pair drawn from the recorded ones
(their joint empirical distribution), from a seeded generator.
"""

from __future__ import annotations

import json
import random
from typing import Iterable

#: Prompt tokens the benchmark client makes of one hash id (128 words "hi" and the id).
BLOCK_TOKENS = 128


def _row(t_ms: float, n_in: int, n_out: int, next_id: list[int], block_tokens: int) -> dict:
    k = max(1, round(n_in / block_tokens))
    ids = list(range(next_id[0], next_id[0] + k))
    next_id[0] += k
    return {"timestamp": int(round(t_ms)), "input_length": int(n_in), "output_length": int(n_out), "hash_ids": ids}


def recorded(arrivals: list[float], pairs: list[tuple[int, int]], block_tokens: int = BLOCK_TOKENS) -> list[dict]:
    """The trace of recorded requests: ``arrivals`` in seconds (any origin), ``pairs`` their (input,
    output) tokens, in the same order; rows sorted by time, the first at 0 ms."""
    order = sorted(range(len(arrivals)), key=arrivals.__getitem__)
    t0 = arrivals[order[0]] if order else 0.0
    next_id = [0]
    return [_row(1000 * (arrivals[i] - t0), *pairs[i], next_id, block_tokens) for i in order]


def poisson(pairs: list[tuple[int, int]], rate: float, count: int, seed: int = 0,
            block_tokens: int = BLOCK_TOKENS) -> list[dict]:
    """``count`` requests, Poisson arrivals at ``rate`` per second (exponential gaps, the first at 0),
    each (input, output) pair drawn with replacement from ``pairs``.

    Raises:
        ValueError: no pairs, or a rate or count that is not > 0.
    """
    if not pairs or not rate > 0 or count < 1:
        raise ValueError("a Poisson trace needs recorded lengths, a rate > 0 and a count >= 1")
    rng = random.Random(seed)
    t, rows, next_id = 0.0, [], [0]
    for i in range(count):
        if i:
            t += rng.expovariate(rate)
        rows.append(_row(1000 * t, *rng.choice(pairs), next_id, block_tokens))
    return rows


def dumps(rows: Iterable[dict]) -> str:
    """The trace as JSON lines."""
    return "".join(json.dumps(r) + "\n" for r in rows)

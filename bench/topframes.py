"""Summarise a py-spy ``--format raw`` (collapsed stacks) profile: top functions by own and total time.

Usage: ``python bench/topframes.py PROFILE.txt [N]``. Line numbers are dropped so that a function's
samples are added up over its lines.
"""

from __future__ import annotations

import re
import sys
from collections import Counter

_LINE = re.compile(r":\d+\)$")


def summarise(path: str, n: int = 15) -> dict:
    own: Counter[str] = Counter()
    total: Counter[str] = Counter()
    samples = 0
    with open(path, encoding="utf-8", errors="replace") as f:
        for row in f:
            row = row.rstrip("\n")
            if not row:
                continue
            stack, _, count = row.rpartition(" ")
            c = int(count)
            frames = [_LINE.sub(")", fr) for fr in stack.split(";")]
            samples += c
            own[frames[-1]] += c
            for fr in set(frames):
                total[fr] += c
    pct = lambda v: round(100.0 * v / samples, 1) if samples else 0.0  # noqa: E731
    return {
        "samples": samples,
        "own": [(fr, pct(v)) for fr, v in own.most_common(n)],
        "total": [(fr, pct(v)) for fr, v in total.most_common(n)],
    }


if __name__ == "__main__":
    s = summarise(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 15)
    print(f"{s['samples']} samples")
    print("own time %  function")
    for fr, p in s["own"]:
        print(f"{p:6.1f}  {fr}")
    print("total time %  function")
    for fr, p in s["total"]:
        print(f"{p:6.1f}  {fr}")

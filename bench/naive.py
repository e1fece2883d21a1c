#!/usr/bin/env python3
"""The naive Python peer of the bench: what a plain script does with the bench log.

One loop over the file's lines with the regular expressions of ``bench/mtail/sglang.mtail`` (the
same lines, the same fields, the same DP attribution), counters in dictionaries, the totals printed
at the end: no templates, no columns, no validation, one core. It shows what straightforward Python
costs per line, beside mtail's compiled program and sglang-exporter's bulk path.

Usage: ``python3 bench/naive.py LOG``
"""

from __future__ import annotations

import re
import sys
from collections import Counter

DECODE = re.compile(r"(?:^|[\]:] *)Decode batch[.,]? (?:\[\d+\][.,] )?#running-req: (?P<running>\d+),")
PREFILL = re.compile(r"(?:^|[\]:] *)Prefill batch[.,]? (?:\[\d+\][.,] )?#new-seq: (?P<seq>\d+), "
                     r"#new-token: (?P<new>\d+), #cached-token: (?P<cached>\d+),")
RETRACT = re.compile(r"(?:KV cache pool is full\. Retract requests\.|[Dd]ecode out of memory happened[.,]"
                     r"|Testing retraction\.) #retracted_reqs: (?P<retracted>\d+)")
DP = re.compile(r" DP(?P<dp>\d+)[ \]]")
USAGE = re.compile(r"token usage: (?P<usage>\d+\.\d+)")
QUEUE = re.compile(r"#queue-req: (?P<queue>\d+)")
GEN = re.compile(r"gen throughput \(token/s\): (?P<gen>\d+\.\d+)")


def main(path: str) -> int:
    lines: Counter = Counter()
    counters: Counter = Counter()
    gauges: dict = {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = DECODE.search(line)
            if m:
                dp = (DP.search(line) or {"dp": "0"})["dp"]
                lines["decode"] += 1
                counters[("batches", dp, "decode")] += 40
                gauges[("running", dp)] = int(m["running"])
                for name, rx in (("usage", USAGE), ("gen", GEN), ("queue", QUEUE)):
                    g = rx.search(line)
                    if g:
                        gauges[(name, dp)] = float(g[1])
                continue
            m = PREFILL.search(line)
            if m:
                dp = (DP.search(line) or {"dp": "0"})["dp"]
                lines["prefill"] += 1
                counters[("batches", dp, "prefill")] += 1
                counters[("computed", dp)] += int(m["new"])
                counters[("cached", dp)] += int(m["cached"])
                for name, rx in (("usage", USAGE), ("queue", QUEUE)):
                    g = rx.search(line)
                    if g:
                        gauges[(name, dp)] = float(g[1])
                continue
            m = RETRACT.search(line)
            if m:
                dp = (DP.search(line) or {"dp": "0"})["dp"]
                lines["retraction"] += 1
                counters[("retractions", dp)] += 1
                counters[("retracted", dp)] += int(m["retracted"])
    for kind, n in sorted(lines.items()):
        print(f'lines_total{{kind="{kind}"}} {n}')
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))

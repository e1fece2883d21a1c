"""Record SGLang's request log on the real-SGLang test bed and keep it for ``sglang-exporter traffic``.

``python3 scripts/keep_requestlog.py [--version V] [--work DIR] [--keep-only]`` runs the test bed's
``request-log`` scenario (``testbed/scenarios.py``: the same Poisson load logged with
``--log-requests --log-requests-level 1``, text format then JSON) and keeps, under
``tests/corpus/requestlog-<V>/``: ``server.log.gz`` (the whole log, the machine's paths replaced as
``scripts/keep_sweep.py`` does), ``client.jsonl`` (the benchmark client's result of each start, with
its per-request ``input_lens`` and ``output_lens``; the per-token ``itls``, texts and errors left out)
and SGLang's ``/metrics`` of each start when it was ready and at the end (``<start>-ready.prom``,
``<start>-end.prom``; the length histograms and the request counter only).
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from keep_sweep import redact  # noqa: E402

from testbed import scenarios, stack  # noqa: E402

#: The client's per-request lists left out (large, not used by the traffic model's tests).
DROP = ("itls", "generated_texts", "errors", "ttfts", "retokenized_output_lens", "server_info")
#: The ``/metrics`` families kept (those ``sglang-exporter traffic --metrics`` reads).
FAMILIES = ("sglang:prompt_tokens_histogram", "sglang:generation_tokens_histogram", "sglang:num_requests")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--version", default=stack.NEWEST)
    p.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "requestlog")
    p.add_argument("--keep-only", action="store_true")
    args = p.parse_args()
    if not args.keep_only:
        scenarios.SCENARIOS["request-log"].run(args.work, args.version)
    dest = ROOT / "tests" / "corpus" / f"requestlog-{args.version}"
    dest.mkdir(parents=True, exist_ok=True)
    run = json.loads((args.work / "run.json").read_text())
    header = (f"# source: sglang-exporter test bed (testbed/scenarios.py: request-log), real SGLang server on CPU, "
              f"tiny random-weight model; flags: {' | '.join(' '.join(s['flags']) for s in run['starts'])}\n"
              f"# version: {run['version']}; date: recorded by scripts/keep_requestlog.py\n"
              "# features: --log-requests level 1, text then JSON format, warm-up requests, client --output-details\n")
    log = redact(header + (args.work / "server.log").read_text(errors="replace"), args.work)
    with gzip.GzipFile(dest / "server.log.gz", "wb", mtime=0) as f:
        f.write(log.encode())
    rows = [json.loads(x) for x in (args.work / "client.jsonl").read_text().splitlines() if x.strip()]
    (dest / "client.jsonl").write_text("".join(
        json.dumps({k: v for k, v in r.items() if k not in DROP}) + "\n" for r in rows))
    for prom in sorted((args.work / "sglang-metrics").glob("*-*.prom")):
        if prom.stem.endswith(("-ready", "-end")):
            lines = [x for x in prom.read_text().splitlines()
                     if any(x.startswith((f, f"# HELP {f}", f"# TYPE {f}")) for f in FAMILIES)]
            (dest / prom.name).write_text(redact("\n".join(lines) + "\n", args.work))
    print(f"kept {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

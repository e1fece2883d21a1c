"""Record the method's sweep on the real-SGLang test bed and keep it in the corpus.

``python3 scripts/keep_sweep.py [--version V] [--work DIR]`` runs the test bed's ``sweep-N`` scenarios
(``testbed/scenarios.py``: ``SWEEP_CEILINGS``) one after another, never in parallel, and keeps each
run's log and client file as ``tests/corpus/sweep-<V>/mrr-<N>.log`` / ``.jsonl``, with the machine's
paths replaced as ``python3 -m testbed keep`` does (its own function, writing into a scratch folder).
``--keep-only`` keeps runs already recorded under ``--work`` (``DIR/<N>``) without running them.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from testbed import keep as keep_mod  # noqa: E402
from testbed import scenarios, stack  # noqa: E402


def redact(text: str, run_dir: Path) -> str:
    """The machine's paths replaced by the aliases of :mod:`testbed.keep`."""
    for path, alias in ((str(stack.model_dir()), "/models/tiny-llama"), (str(run_dir.resolve()), "/run"),
                        (str(stack.cache_dir()), "/cache"), (str(Path.home()), "/home/user")):
        text = text.replace(path, alias)
    return text


def keep_one(run_dir: Path, dest: Path, n: int) -> None:
    """Keep one run: the log through :func:`testbed.keep.keep` (into a scratch corpus), the client file redacted."""
    with tempfile.TemporaryDirectory() as scratch:
        keep_mod.CORPUS = Path(scratch)
        (Path(scratch) / "SHA256SUMS").write_text("")
        log = keep_mod.keep(run_dir, f"mrr-{n}", f"method sweep: --max-running-requests {n}, retractions, client file")
        shutil.copy(log, dest / f"mrr-{n}.log")
    (dest / f"mrr-{n}.jsonl").write_text(redact((run_dir / "client.jsonl").read_text(), run_dir))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--version", default=stack.NEWEST)
    p.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "sweep")
    p.add_argument("--keep-only", action="store_true")
    args = p.parse_args()
    dest = ROOT / "tests" / "corpus" / f"sweep-{args.version}"
    dest.mkdir(parents=True, exist_ok=True)
    for n in scenarios.SWEEP_CEILINGS:
        run_dir = args.work / str(n)
        if not args.keep_only:
            scenarios.SCENARIOS[f"sweep-{n}"].run(run_dir, args.version)
        keep_one(run_dir, dest, n)
        print(f"kept {dest / f'mrr-{n}.log'}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

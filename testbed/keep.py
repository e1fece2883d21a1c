"""Keep a finished scenario's log in the corpus: ``python3 -m testbed keep RUN_DIR NAME``.

Writes ``tests/corpus/NAME.log``: the three ``# `` header lines of every corpus file (source,
version and date, features) and the server's log, with the machine's own paths replaced (the
model folder by ``/models/tiny-llama`` or ``/models/tiny-qwen3-omni``, the run folder by ``/run``),
then updates ``SHA256SUMS``. A run of ``testbed/omni.py`` (its ``run.json`` says ``shim``) gets
the SGLang Omni header.
The INDEX entry and the golden file are written by hand (``tests/corpus/INDEX.md``,
``tests/golden/CHECKED.md``).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from . import stack

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "corpus"


def keep(run_dir: Path, name: str, features: str) -> Path:
    """Copy ``run_dir/server.log`` to the corpus as ``name`` (see the module docstring)."""
    run = json.loads((run_dir / "run.json").read_text())
    text = (run_dir / "server.log").read_text(errors="replace")
    for path, alias in ((str(stack.omni_model_dir()), "/models/tiny-qwen3-omni"),
                        (str(stack.model_dir()), "/models/tiny-llama"), (str(run_dir.resolve()), "/run"),
                        (str(stack.cache_dir()), "/cache"), (str(Path.home()), "/home/user")):
        text = text.replace(path, alias)
    if "shim" in run:  # testbed/omni.py
        header = (f"# source: sglang-exporter test bed (testbed/omni.py), real SGLang Omni pipeline "
                  f"({run.get('launcher', 'sgl-omni serve')}) "
                  f"on CPU, tiny random-weight Qwen3-Omni, {'with' if run['shim'] else 'without'} the logging shim; "
                  f"flags: {' '.join(run['flags'])}; load: {run['load']}\n"
                  f"# version: {run['version']} (SGLang {stack.OMNI[run['version'].removeprefix('omni-')]['sglang']}); "
                  "date: recorded with testbed/omni.py\n"
                  f"# features: {features}\n")
    else:
        flags = " | ".join(" ".join(s["flags"]) for s in run["starts"]).replace(str(run_dir.resolve()), "/run")
        header = (f"# source: sglang-exporter test bed (testbed/scenarios.py: {run['scenario']}), real SGLang server "
                  f"on CPU, tiny random-weight model; flags: {flags}\n"
                  f"# version: {run['version']}; date: recorded by python3 -m testbed run\n"
                  f"# features: {features}\n")
    out = CORPUS / f"{name}.log"
    out.write_text(header + text)
    sums = CORPUS / "SHA256SUMS"
    lines = [x for x in sums.read_text().splitlines() if not x.endswith(f"  {out.name}")]
    lines.append(f"{hashlib.sha256(out.read_bytes()).hexdigest()}  {out.name}")
    sums.write_text("\n".join(sorted(lines, key=lambda x: x.split("  ", 1)[1])) + "\n")
    return out

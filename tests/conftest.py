"""Shared test helpers: where the real corpus is, real promtool, and reading exposition text."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parents[1]
#: The real-log corpus, kept in the repository (a copy of the project's shared corpus, with its INDEX).
CORPUS = ROOT / "tests" / "corpus"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def default_sigint() -> None:
    """``preexec_fn`` of a command a test interrupts with SIGINT: SIGINT's default action in the child,
    as a terminal's foreground job has it. A test run started as a background job of a shell without job
    control (``cmd &``) inherits SIGINT ignored, and Python then never raises ``KeyboardInterrupt``."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def corpus_files() -> list[Path]:
    """Every real log of the corpus (fails loudly when the corpus is missing)."""
    files = sorted(CORPUS.glob("*.log"))
    if not files:
        pytest.fail(f"the corpus is missing: expected logs in {CORPUS}")
    return files


def require_tool(name: str) -> str:
    """Path of an external tool; skip when absent locally, fail when absent in CI."""
    path = shutil.which(name)
    if path is None:
        message = f"{name} is not installed (Debian package 'prometheus' ships promtool; .ci/run installs it)"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    return path


@pytest.fixture
def promtool() -> str:
    return require_tool("promtool")


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Parse exposition text into ``{(sample_name, sorted_labels): value}``."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(text_or_samples, name: str, **labels) -> float | None:
    """One sample's value by name and exact labels, or None when absent."""
    data = samples(text_or_samples) if isinstance(text_or_samples, str) else text_or_samples
    return data.get((name, tuple(sorted(labels.items()))))


def check_documented_example(page: Path, marker: str) -> None:
    """A docs page's ``<!-- MARKER: sglang-exporter ARGS -->`` followed by a ``text`` block shows what
    ``sglang-exporter ARGS`` prints: rerun it here and require the same text."""
    import re
    import subprocess
    import sys
    text = page.read_text(encoding="utf-8")
    m = re.search(rf"<!-- {marker}: sglang-exporter ([^>]*?) -->\n```text\n(.*?)\n```\n", text, re.S)
    assert m, f"{page.name} lost its {marker} marker or the text block after it"
    out = subprocess.run([sys.executable, "-m", "exporter", *m.group(1).split()], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.rstrip("\n") == m.group(2), f"rerun the command and paste its output into {page.name}"

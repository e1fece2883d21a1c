"""The metric table of docs/metrics.md and the real /metrics output name the same metrics, with the same types."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import ROOT, corpus_files
from prometheus_client.parser import text_string_to_metric_families
from exporter_support import Exporter, one_shot

ROW = re.compile(r"^\| `(sglang_[a-z0-9_]+)` \| (counter|gauge|histogram|summary|info) \|")


#: Where the metric reference lives (README.md links to it).
METRICS_DOC = ROOT / "docs" / "metrics.md"


def doc_table() -> dict[str, str]:
    """``{name: type}`` of the table that follows the ``<!-- metrics-table`` marker of docs/metrics.md."""
    text = METRICS_DOC.read_text(encoding="utf-8")
    start = text.index("<!-- metrics-table")
    rows = {}
    for line in text[start:].splitlines()[1:]:
        if not line.startswith("|") and rows:
            break
        m = ROW.match(line)
        if m:
            rows[m.group(1)] = m.group(2)
    return rows


def exposed(text: str) -> dict[str, str]:
    out = {}
    for fam in text_string_to_metric_families(text):
        name = fam.name + "_total" if fam.type == "counter" else fam.name
        out[name] = fam.type
    return out


def test_metrics_doc_table_matches_real_output(tmp_path: Path):
    names: dict[str, str] = {}
    for path in corpus_files():
        names.update(exposed(one_shot(path)))
    log = tmp_path / "sglang.log"
    log.write_text("")
    # A glob beside the path: families without samples are not exposed, and the glob's family has one
    # sample per pattern (0 files here).
    exp = Exporter("--log.path", f"{log},{tmp_path / 'other-*.log'}")
    try:
        names.update(exposed(exp.get("/metrics")[1]))
    finally:
        assert exp.terminate() == 0
    ours = {n: t for n, t in names.items() if n.startswith(("sglang_scheduler_", "sglang_exporter_"))}
    table = {n: t for n, t in doc_table().items() if n.startswith(("sglang_scheduler_", "sglang_exporter_"))}
    assert sorted(set(ours) - set(table)) == [], "exposed but not in the table of docs/metrics.md"
    assert sorted(set(table) - set(ours)) == [], "in the table of docs/metrics.md but never exposed"
    assert {n: ours[n] for n in table} == table, "types differ"

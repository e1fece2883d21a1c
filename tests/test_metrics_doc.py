"""docs/metrics.md: generated from the metric table, fresh, and true to the real /metrics output.

Every family of the page's table, GPU and FPM ones included, is checked against what the real
command serves (one-shot over the whole corpus and a two-stage SGLang Omni log, a live command
following a file and a glob, the real GPU collector over the fake NVML, the real FPM collector over
messages built from SGLang's structs, the real Omni collector polling a server that answers as SGLang
Omni does): the same names, the same types, and label sets that are the row's labels (plus its
optional MIG labels where a MIG device answered).
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

from conftest import ROOT, corpus_files
from exporter_support import Exporter, fpm_exposition, gpu_exposition, one_shot_run
from omni_http_support import omni_exposition
from prometheus_client.parser import text_string_to_metric_families

#: Where the metric reference lives (README.md links to it).
METRICS_DOC = ROOT / "docs" / "metrics.md"
ROW = re.compile(r"^\| `(sglang_[a-z0-9_]+)` \| (counter|gauge|histogram|summary|info) \| ([^|]*) \|")
_LABEL = re.compile(r"`([a-z_][a-z0-9_]*)`")


def build_metrics_doc():
    spec = importlib.util.spec_from_file_location("build_metrics_doc", ROOT / "scripts" / "build_metrics_doc.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def doc_table(text: str | None = None) -> dict[str, tuple[str, frozenset[str], frozenset[str]]]:
    """``{name: (type, labels, optional labels)}`` of every row of the page's generated table."""
    if text is None:
        text = METRICS_DOC.read_text(encoding="utf-8")
    start = text.index("<!-- metrics-table")
    end = text.index("<!-- end of metrics-table")
    rows = {}
    for line in text[start:end].splitlines():
        m = ROW.match(line)
        if m:
            cell = m.group(3)
            optional = re.search(r"\(MIG: ([^)]*)\)", cell)
            required = cell[:optional.start()] + cell[optional.end():] if optional else cell
            rows[m.group(1)] = (m.group(2), frozenset(_LABEL.findall(required)),
                                frozenset(_LABEL.findall(optional.group(1))) if optional else frozenset())
    return rows


def exposed(text: str, into: dict[str, tuple[str, set[frozenset[str]]]]) -> None:
    """Add ``{name: (type, label sets seen)}`` of an exposition (``le`` left out)."""
    for fam in text_string_to_metric_families(text):
        name = fam.name + "_total" if fam.type == "counter" else fam.name
        _, seen = into.setdefault(name, (fam.type, set()))
        for s in fam.samples:
            seen.add(frozenset(k for k in s.labels if k != "le"))


def real_output(tmp_path: Path) -> dict[str, tuple[str, set[frozenset[str]]]]:
    found: dict[str, tuple[str, set[frozenset[str]]]] = {}
    for path in [*corpus_files(), ROOT / "tests" / "omni" / "two-stage-shim.log"]:
        exposed(one_shot_run(path)[1], found)
    log = tmp_path / "sglang.log"
    log.write_text("")
    (tmp_path / "requests").mkdir()
    exp = Exporter("--log.path", f"{log},{tmp_path / 'requests'}/*.log")
    try:
        exposed(exp.get("/metrics")[1], found)
    finally:
        assert exp.terminate() == 0
    exposed(gpu_exposition(), found)
    exposed(fpm_exposition(), found)
    exposed(omni_exposition(), found)
    return found


def test_the_page_is_the_generators_output():
    text = METRICS_DOC.read_text(encoding="utf-8")
    assert build_metrics_doc().update(text) == text, "docs/metrics.md is stale: run python3 scripts/build_metrics_doc.py"


def test_metrics_doc_table_matches_real_output(tmp_path: Path):
    real = real_output(tmp_path)
    table = doc_table()
    assert sorted(set(real) - set(table)) == [], "exposed but not in the table of docs/metrics.md"
    assert sorted(set(table) - set(real)) == [], "in the table of docs/metrics.md but never exposed"
    assert {n: real[n][0] for n in table} == {n: t for n, (t, _, _) in table.items()}, "types differ"
    unseen = sorted(n for n in table if not real[n][1])
    assert unseen == [], "families without a sample in the real output: their labels go unchecked"
    for name, (_, labels, optional) in table.items():
        allowed = {labels, labels | optional}
        assert real[name][1] <= allowed, f"{name}: label sets {sorted(map(sorted, real[name][1]))}, table {sorted(labels)}"
        assert labels in real[name][1] or (optional and labels | optional in real[name][1]), name


def test_the_doc_check_sees_a_wrong_label():
    """The parser of the page's table reads labels, so a label renamed in the docs would be caught."""
    text = METRICS_DOC.read_text(encoding="utf-8").replace(
        "| `sglang_scheduler_batch_size` | histogram | `stage`, `dp_rank`, `phase` |",
        "| `sglang_scheduler_batch_size` | histogram | `stage`, `dp_rank`, `phaze` |")
    assert doc_table(text)["sglang_scheduler_batch_size"][1] == {"stage", "dp_rank", "phaze"}
    mig = doc_table()["sglang_gpu_info"]
    assert {"gpu", "uuid", "mig_mode"} <= mig[1] and mig[2] == {"gpu_instance_id", "compute_instance_id"}
